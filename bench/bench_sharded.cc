// bench_sharded: sharded data parallelism (`--shard`, trainers/sharded/) beside plain sync: step
// time and what each worker holds for the gpt (dim 384, 6 layers, 6 heads by default; a byte
// vocabulary of 256, context --seq-len, adamw) or a deep mlp (`--model mlp --hidden ...` on
// synthetic 784-feature examples of 10 classes: it splits into layers, so --shard parameters runs
// too), with 2 (and 4) replicas as threads of this process over shared memory.
//
//   build/bin/bench_sharded                                  # the table for docs/benchmarks.md
//   build/bin/bench_sharded --replicas 2,4 --steps 8 --runs 3
//   build/bin/bench_sharded --model mlp --hidden 2048,2048,2048,2048 --batch-size 256
//
// Every configuration runs one untimed 2-step job first; then --runs rounds run every stage once,
// so drift in the machine's load hits all of them alike (--stages: some of them; the first is the
// ratio's base). Columns: the median step time (the slowest replica's training time / steps) and
// its ratio to plain sync's; the reduction's time per step
// (all-reduce, or reduce-scatter when sharded: the comm thread's clock; --shard parameters: its
// layers' gathers and reduce-scatters together) and the share of it hidden behind backward (not
// measured for --shard parameters: "-"); the all-gather of the updated parameters per step (sharded only: it runs after
// the update, never hidden); and rank 0's bytes per parameter — plain sync's are what it allocates
// (4 + 4 + 8: parameters, gradients, adam's moments), a sharded replica's are measured (its
// gradient pages resident at their peak, trainers/sharded/page_buffer.h) — beside the ZeRO
// formula. Every sharded job must end with plain sync's parameters to 1e-5 (relative).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "bench/bench_common.h"
#include "bench/synthetic.h"
#include "collectives/shm_transport.h"
#include "kernels/cpu/blas_info.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
using namespace troupe::bench;
using namespace troupe::collectives;

namespace {

struct RunResult {
  double step_seconds = 0;
  GradBucketStats buckets;  // rank 0's
  ShardStats shard;         // rank 0's
  std::vector<float> params;
};

// `keep`: hand back the trained parameters (checked against plain sync's; --shard parameters then
// gathers the whole model at the end, which a run measuring what fits leaves out).
Expected<RunResult> run_once(int n, ShardStage stage, const TrainOptions& o, const Dataset& train, const Dataset& test,
                             int generation, bool keep) {
  std::vector<std::unique_ptr<Transport>> group(n);
  std::vector<Status> status(n);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        ShmGroupOptions s;
        s.name = "bench-sharded-" + std::to_string(::getpid()) + "." + std::to_string(generation);
        s.rank = r;
        s.size = n;
        auto t = connect_shm_group(s);
        if (t.ok()) group[r] = std::move(*t); else status[r] = t.status();
      });
    for (auto& t : threads) t.join();
  }
  for (const Status& s : status)
    if (!s.ok()) return s;
  std::vector<TrainResult> results(n);
  std::vector<std::vector<float>> params(n);
  RunResult out;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Communicator comm(std::move(group[r]));
      Replica replica;
      replica.comm = &comm;
      replica.checksum_every = 0;
      replica.shard = stage;
      replica.bucket_stats = r == 0 ? &out.buckets : nullptr;
      replica.shard_stats = r == 0 ? &out.shard : nullptr;
      auto res = train_replica(o, train, test, replica, {}, keep ? &params[r] : nullptr);
      if (res.ok()) results[r] = *res; else status[r] = res.status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (!status[r].ok()) return status[r].with_context("replica " + std::to_string(r));
    if (params[r] != params[0]) return internal_error("replica " + std::to_string(r) + " ended with other parameters");
    out.step_seconds = std::max(out.step_seconds, o.batch_size / results[r].samples_per_second);
  }
  out.params = std::move(params[0]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::kernels::cpu::reexec_for_blas(argv);
  int runs = 3, dim = 384, layers = 6, heads = 6;
  int64_t steps = 6, seq = 128;
  std::vector<int> replica_counts{2};
  TrainOptions o;
  o.model = "gpt";
  o.batch_size = 8;
  o.epochs = 1;
  o.evaluate_each_epoch = false;
  o.optimizer = "adamw";
  o.lr = 3e-4f;
  o.weight_decay = 0.1f;
  o.weight_decay_params = "matrices";
  o.clip_grad_norm = 1.0f;
  CLI::App app{"Step time and memory per worker: sync with --shard none, optimizer, gradients (the gpt)"};
  app.add_option("--runs", runs, "Timed jobs per configuration (medians)")->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--steps", steps, "Steps per job")->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Global batch in windows")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--seq-len", seq, "Context (tokens per window)")->check(CLI::Range(2, 4096))->capture_default_str();
  app.add_option("--dim", dim, "Model width")->check(CLI::Range(8, 8192))->capture_default_str();
  app.add_option("--layers", layers, "Blocks")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--heads", heads, "Attention heads")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--replicas", replica_counts, "Replica counts")->delimiter(',')->capture_default_str();
  std::vector<int> hidden{2048, 2048, 2048, 2048};
  app.add_option("--model", o.model, "gpt, or mlp (with --hidden; --shard parameters too)")
      ->check(CLI::IsMember({"gpt", "mlp"}))->capture_default_str();
  app.add_option("--hidden", hidden, "mlp: hidden layer sizes")->delimiter(',')->capture_default_str();
  std::vector<std::string> stage_names{"none", "optimizer", "gradients", "parameters"};
  app.add_option("--stages", stage_names, "Which --shard stages to run (the parameter check needs none)")
      ->delimiter(',')->check(CLI::IsMember({"none", "optimizer", "gradients", "parameters"}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const bool gpt = o.model == "gpt";
  if (gpt) {
    o.seq_len = seq;
    o.trainer_args = {"layers=" + std::to_string(layers), "heads=" + std::to_string(heads),
                      "dim=" + std::to_string(dim)};
  } else {
    o.hidden = hidden;
  }
  spdlog::set_level(spdlog::level::warn);

  const Dataset train = gpt ? byte_windows(o.batch_size * (steps + 1), seq, 1)
                            : synthetic_images(o.batch_size * (steps + 1), 1);
  const Dataset test = gpt ? byte_windows(2, seq, 2) : synthetic_images(100, 2);
  std::printf("# %s\n# %s, %u hardware threads; %s\n", command_line(argc, argv).c_str(), cpu_model().c_str(),
              std::thread::hardware_concurrency(), blas_description().c_str());
  if (gpt)
    std::printf("# gpt L%d H%d D%d T%lld V256, adamw, global batch %d windows, %lld steps per job, replicas are "
                "threads over shared memory, 256 KiB buckets\n",
                layers, heads, dim, static_cast<long long>(seq), o.batch_size, static_cast<long long>(steps));
  else
    std::printf("# mlp 784-%s-10, adamw, global batch %d, %lld steps per job, replicas are threads over shared "
                "memory, 256 KiB buckets (--shard parameters: one unit per layer)\n",
                [&] {
                  std::string h;
                  for (int x : hidden) h += (h.empty() ? "" : "-") + std::to_string(x);
                  return h;
                }().c_str(),
                o.batch_size, static_cast<long long>(steps));
  std::printf("%8s %10s %10s %7s %12s %8s %12s %12s %12s %9s\n", "replicas", "shard", "step ms", "ratio", "reduce ms",
              "hidden", "gather ms", "MB/worker", "bytes/param", "formula");
  std::vector<ShardStage> stages;  // (the gpt splits into layers for parameters when untied, the default)
  for (const std::string& name : stage_names) {
    ShardStage stage = ShardStage::none;
    parse_shard_stage(name, &stage);
    stages.push_back(stage);
  }
  const bool with_plain = stages.front() == ShardStage::none;
  auto setup = set_up_trainer(o, train.spec(), 0, 1);
  if (!setup.ok()) {
    std::fprintf(stderr, "error: %s\n", setup.status().to_string().c_str());
    return 1;
  }
  const size_t model_size = setup->space.size();
  int generation = 0;
  for (int n : replica_counts) {
    std::map<ShardStage, std::vector<RunResult>> timed;
    for (int round = -1; round < runs; ++round)
      for (ShardStage stage : stages) {
        TrainOptions job = o;
        job.max_steps = round < 0 ? 2 : steps;
        auto res = run_once(n, stage, job, train, test, ++generation, with_plain);
        if (!res.ok()) {
          std::fprintf(stderr, "error: %d replicas, --shard %s: %s\n", n, shard_stage_name(stage),
                       res.status().to_string().c_str());
          return 1;
        }
        if (round >= 0) timed[stage].push_back(std::move(*res));
      }
    const double params = static_cast<double>(model_size);
    auto step_median = [&](ShardStage s) {
      std::vector<double> v;
      for (auto& r : timed[s]) v.push_back(r.step_seconds);
      return median(v);
    };
    const double base = step_median(stages.front());
    for (ShardStage stage : stages) {
      std::vector<double> reduce, hidden, gather;
      double bytes = 0;
      for (auto& r : timed[stage]) {
        reduce.push_back(stage == ShardStage::parameters ? r.shard.layer_comm_seconds / static_cast<double>(steps)
                                                         : r.buckets.comm_seconds / std::max<int64_t>(1, r.buckets.steps));
        hidden.push_back(r.buckets.hidden_fraction());
        gather.push_back(r.shard.gather_seconds / static_cast<double>(steps));
        bytes = std::max(bytes, stage == ShardStage::none ? 16 * params + 8 : static_cast<double>(r.shard.total()));
        const double diff = with_plain ? relative_difference(r.params, timed[ShardStage::none].front().params) : 0;
        if (diff > 1e-5) {
          std::fprintf(stderr, "error: --shard %s ended %.3g (relative) away from plain sync's parameters\n",
                       shard_stage_name(stage), diff);
          return 1;
        }
      }
      const double formula = stage == ShardStage::none        ? 16
                             : stage == ShardStage::optimizer ? 8 + 8.0 / n
                             : stage == ShardStage::gradients ? 4 + 12.0 / n
                                                              : 16.0 / n;  // + the gathered layers
      const std::string hidden_text =
          stage == ShardStage::parameters ? "-" : std::to_string(static_cast<int>(std::lround(median(hidden) * 100))) + "%";
      std::printf("%8d %10s %10.1f %7.3f %12.2f %8s %12.2f %12.1f %12.2f %9.2f\n", n, shard_stage_name(stage),
                  step_median(stage) * 1e3, step_median(stage) / base, median(reduce) * 1e3, hidden_text.c_str(),
                  stage == ShardStage::none ? 0.0 : median(gather) * 1e3, bytes / 1e6, bytes / params, formula);
    }
    std::fflush(stdout);
  }
  return 0;
}
