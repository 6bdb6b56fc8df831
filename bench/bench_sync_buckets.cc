// bench_sync_buckets: step time of `sync` data-parallel training of the MLP (784-256-128-10, Adam,
// one BLAS thread per replica) or the gpt (`--model gpt`: random byte windows) with the gradients
// all-reduced in one call after backward (bucket 0) against buckets all-reduced by the comm thread
// while backward runs (trainers/sync/grad_buckets.h), for 2 and 4 replicas as threads of this process
// over shared memory (staged through the group's slots: "shm"; or with the gradients in the
// group's zero-copy arena, as a sync job on one host keeps them: "arena") and over TCP loopback.
//
//   build/bin/bench_sync_buckets                                 # table for docs/benchmarks.md
//   build/bin/bench_sync_buckets --replicas 4 --transports shm --buckets 0,65536,262144 --runs 7
//   build/bin/bench_sync_buckets --transports tcp --replicas 2 --wires f32,bf16   # --grad-wire
//   build/bin/bench_sync_buckets --model gpt --transports shm,arena --replicas 2 # the arena's gain
//
// Each job is one fresh group and one train_replica job per replica of --steps steps (training
// time only (samples_per_second), evaluation excluded; the step time is the slowest replica's). Every
// configuration runs one untimed 10-step job first; then --runs rounds run every configuration once,
// so drift in the machine's load hits all of them alike. The table gives the median step time, its
// ratio to the first --buckets entry's (0: one all-reduce), and, from the comm thread's own clock
// (GradBucketStats), the all-reduce time per step, the time per step the trainer still waited for it
// after backward, and the share of the all-reduce time that ran before forward_backward returned
// (hidden behind it; the rest the step waits for, or it runs while the step winds up). Every job checks
// that all replicas end with the same parameters bit for bit, and that bucketed jobs match the
// first entry's to 1e-5 relative (per wire: a bf16 wire rounds partial sums, so it is compared with
// its own first bucket; the ratio column is against the first wire's first bucket).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>
#include <random>
#include <thread>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "bench/bench_common.h"
#include "bench/synthetic.h"
#include "collectives/shm_transport.h"
#include "collectives/tcp_transport.h"
#include "kernels/cpu/blas_info.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
using namespace troupe::bench;
using namespace troupe::collectives;

namespace {

// One group of `n` transports of `kind` ("shm", "arena": shm with `arena_bytes` per rank, or
// "tcp"), formed concurrently.
Expected<std::vector<std::unique_ptr<Transport>>> make_group(const std::string& kind, int n, int generation,
                                                             size_t arena_bytes) {
  std::vector<std::unique_ptr<Transport>> transports(n);
  std::vector<Status> status(n);
  std::vector<TcpListener> listeners;
  std::vector<std::string> addresses;
  if (kind == "tcp")
    for (int r = 0; r < n; ++r) {
      auto l = TcpListener::open("127.0.0.1");
      if (!l.ok()) return l.status();
      addresses.push_back("127.0.0.1:" + std::to_string(l->port()));
      listeners.push_back(std::move(*l));
    }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Expected<std::unique_ptr<Transport>> t = unavailable("unknown transport " + kind);
      if (kind == "shm" || kind == "arena") {
        ShmGroupOptions s;
        s.name = "bench-buckets-" + std::to_string(::getpid()) + "." + std::to_string(generation);
        s.rank = r;
        s.size = n;
        if (kind == "arena") s.shared_buffer_bytes = arena_bytes;
        t = connect_shm_group(s);
      } else if (kind == "tcp") {
        TcpGroupOptions o;
        o.group = "bench-buckets";
        o.generation = generation;
        t = connect_tcp_group(r, std::move(listeners[r]), addresses, o);
      }
      if (t.ok()) transports[r] = std::move(*t); else status[r] = t.status();
    });
  for (auto& t : threads) t.join();
  for (auto& s : status)
    if (!s.ok()) return s;
  return transports;
}

struct RunResult {
  double step_seconds = 0;  // the slowest replica's train time / steps
  GradBucketStats stats;    // rank 0's
  std::vector<float> params;
};

Expected<RunResult> run_once(const std::string& kind, int n, size_t bucket_bytes, DType wire, const TrainOptions& o,
                             const Dataset& train, const Dataset& test, int generation, size_t arena_bytes) {
  auto group = make_group(kind, n, generation, arena_bytes);
  if (!group.ok()) return group.status();
  std::vector<Status> status(n);
  std::vector<TrainResult> results(n);
  std::vector<std::vector<float>> params(n);
  GradBucketStats stats;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Communicator comm(std::move((*group)[r]));
      Replica replica;
      replica.comm = &comm;
      replica.checksum_every = 0;
      replica.bucket_bytes = bucket_bytes;
      replica.grad_wire = wire;
      replica.bucket_stats = r == 0 ? &stats : nullptr;
      auto res = train_replica(o, train, test, replica, {}, &params[r]);
      if (res.ok()) results[r] = *res; else status[r] = res.status();
    });
  for (auto& t : threads) t.join();
  RunResult out;
  for (int r = 0; r < n; ++r) {
    if (!status[r].ok()) return status[r].with_context("replica " + std::to_string(r));
    if (params[r] != params[0]) return internal_error("replica " + std::to_string(r) + " ended with other parameters");
    out.step_seconds = std::max(out.step_seconds, o.batch_size / results[r].samples_per_second);
  }
  out.stats = stats;
  out.params = std::move(params[0]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::kernels::cpu::reexec_for_blas(argv);
  TrainOptions o;
  o.epochs = 1;
  o.evaluate_each_epoch = false;
  int runs = 5;
  int64_t steps = 100;
  std::vector<int> replica_counts{2, 4};
  std::vector<std::string> transports{"shm", "tcp"};
  std::vector<size_t> buckets{0, 64 << 10, 256 << 10};
  std::vector<std::string> wire_names{"f32"};
  CLI::App app{"Step time of sync training with gradient buckets overlapping backward vs one all-reduce"};
  app.add_option("--runs", runs, "Timed jobs per configuration (medians are reported)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--steps", steps, "Steps per job")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Global batch (divided among the replicas)")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--hidden", o.hidden, "Hidden layer sizes")->delimiter(',')->capture_default_str();
  app.add_option("--replicas", replica_counts, "Replica counts")->delimiter(',')->capture_default_str();
  app.add_option("--transports", transports, "shm (staged), arena (shm, gradients in its arena) and/or tcp (loopback)")
      ->delimiter(',')->check(CLI::IsMember({"shm", "arena", "tcp"}))->capture_default_str();
  std::string model = "mlp";
  int64_t seq = 128, dim = 384, layers = 6, heads = 6;
  app.add_option("--model", model, "mlp (--hidden), or gpt (--dim --layers --heads --seq-len; --batch-size in windows)")
      ->check(CLI::IsMember({"mlp", "gpt"}))->capture_default_str();
  app.add_option("--seq-len", seq, "gpt: tokens per window")->check(CLI::Range(2, 4096))->capture_default_str();
  app.add_option("--dim", dim, "gpt: width")->check(CLI::Range(8, 8192))->capture_default_str();
  app.add_option("--layers", layers, "gpt: blocks")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--heads", heads, "gpt: attention heads")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--buckets", buckets, "Bucket sizes in bytes; 0 = one all-reduce after backward")
      ->delimiter(',')->capture_default_str();
  app.add_option("--wires", wire_names, "Gradient wires (Replica::grad_wire): f32, bf16, f16")
      ->delimiter(',')->check(CLI::IsMember({"f32", "bf16", "f16"}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::vector<std::pair<DType, size_t>> configs;  // (wire, bucket bytes)
  for (const std::string& w : wire_names) {
    DType wire = DType::f32;
    parse_dtype(w, &wire);
    for (size_t b : buckets) configs.emplace_back(wire, b);
  }
  spdlog::set_level(spdlog::level::warn);

  const bool gpt = model == "gpt";
  if (gpt) {
    o.model = "gpt";
    o.seq_len = seq;
    o.optimizer = "adamw";
    o.lr = 3e-4f;
    o.trainer_args = {"layers=" + std::to_string(layers), "heads=" + std::to_string(heads), "dim=" + std::to_string(dim)};
  }
  const int64_t examples = static_cast<int64_t>(o.batch_size) * (steps + 1);
  const Dataset train = gpt ? byte_windows(examples, seq, 1) : synthetic_images(examples, 1);
  const Dataset test = gpt ? byte_windows(2, seq, 2) : synthetic_images(100, 2);
  auto setup = set_up_trainer(o, train.spec(), 0, 1);
  if (!setup.ok()) {
    std::fprintf(stderr, "error: %s\n", setup.status().to_string().c_str());
    return 1;
  }
  const size_t arena_bytes = (setup->space.size() + 2) * sizeof(float);  // what train_replica asks for
  std::printf("# %s\n# %s, %u hardware threads; %s\n", command_line(argc, argv).c_str(), cpu_model().c_str(),
              std::thread::hardware_concurrency(), blas_description().c_str());
  if (gpt)
    std::printf("# gpt L%lld H%lld D%lld T%lld V256 (%zu parameters), adamw, global batch %d windows, %lld steps per "
                "job, random bytes, replicas are threads\n",
                static_cast<long long>(layers), static_cast<long long>(heads), static_cast<long long>(dim),
                static_cast<long long>(seq), setup->space.size(), o.batch_size, static_cast<long long>(steps));
  else
    std::printf("# MLP 784-%s-10, adam, global batch %d, %lld steps per job, synthetic data, replicas are threads\n",
                [&] {
                  std::string h;
                  for (int x : o.hidden) h += (h.empty() ? "" : "-") + std::to_string(x);
                  return h;
                }().c_str(),
                o.batch_size, static_cast<long long>(steps));
  std::printf("%-5s %8s %5s %10s %7s %12s %8s %12s %12s %8s %8s\n", "xport", "replicas", "wire", "bucket", "buckets",
              "step ms", "ratio", "allreduce ms", "waited ms", "hidden", "vs shm");
  std::map<std::tuple<int, DType, size_t>, double> shm_step;  // the staged path's medians, for the arena's rows
  int generation = 0;
  for (const std::string& kind : transports)
    for (int n : replica_counts) {
      // One untimed warm-up job per configuration, then `runs` rounds over all of them.
      std::map<std::pair<DType, size_t>, std::vector<RunResult>> timed;
      for (int round = -1; round < runs; ++round)
        for (const auto& config : configs) {
          TrainOptions job = o;
          job.max_steps = round < 0 ? std::min<int64_t>(steps, 10) : steps;
          auto res = run_once(kind, n, config.second, config.first, job, train, test, ++generation, arena_bytes);
          if (!res.ok()) {
            std::fprintf(stderr, "error: %s, %d replicas, wire %s, bucket %zu: %s\n", kind.c_str(), n,
                         dtype_name(config.first), config.second, res.status().to_string().c_str());
            return 1;
          }
          if (round >= 0) timed[config].push_back(std::move(*res));
        }
      const double base = [&] {
        std::vector<double> s;
        for (auto& r : timed[configs.front()]) s.push_back(r.step_seconds);
        return median(s);
      }();
      for (const auto& config : configs) {
        const auto [wire, bytes] = config;
        const std::pair<DType, size_t> same_wire{wire, buckets.front()};
        std::vector<double> step, comm, wait, hidden;
        for (auto& r : timed[config]) {
          step.push_back(r.step_seconds);
          if (r.stats.steps > 0) {
            comm.push_back(r.stats.comm_seconds / r.stats.steps);
            wait.push_back(r.stats.wait_seconds / r.stats.steps);
            hidden.push_back(r.stats.hidden_fraction());
          }
          const double diff = relative_difference(r.params, timed[same_wire].front().params);
          if (wire == DType::f32 && diff > 1e-5) {
            std::fprintf(stderr, "error: bucket %zu ended %.3g (relative) away from bucket %zu's parameters\n", bytes,
                         diff, buckets.front());
            return 1;
          }
        }
        const int count = bytes == 0 ? 1 : static_cast<int>(timed[config].front().stats.buckets);
        const auto key = std::make_tuple(n, wire, bytes);
        if (kind == "shm") shm_step[key] = median(step);
        const std::string vs_shm = kind == "arena" && shm_step.count(key)
                                       ? std::to_string(median(step) / shm_step[key]).substr(0, 5) + "x"
                                       : "-";
        if (comm.empty())
          std::printf("%-5s %8d %5s %10zu %7d %12.3f %8.3f %12s %12s %8s %8s\n", kind.c_str(), n, dtype_name(wire),
                      bytes, count, median(step) * 1e3, median(step) / base, "-", "-", "-", vs_shm.c_str());
        else
          std::printf("%-5s %8d %5s %10zu %7d %12.3f %8.3f %12.3f %12.3f %7.0f%% %8s\n", kind.c_str(), n,
                      dtype_name(wire), bytes, count, median(step) * 1e3, median(step) / base, median(comm) * 1e3,
                      median(wait) * 1e3, median(hidden) * 100, vs_shm.c_str());
      }
      std::fflush(stdout);
    }
  return 0;
}
