// bench_train_cpu: single-worker CPU training throughput of the MLP (default 784-256-128-10, batch
// 128, Adam, one BLAS thread), in samples/s and in GFLOP/s against the core's measured FMA peak.
//
//   build/bin/bench_train_cpu                       # table for docs/benchmarks.md
//   build/bin/bench_train_cpu --runs 7 --steps 200 --json train_cpu.json
//
// Each run is a fresh train_mlp_cpu job of --steps steps (max_steps), after one warm-up job; the
// throughput is the job's own samples/s (training time only, evaluation excluded), reported as the
// median and best over --runs. A breakdown times the parts of one step in isolation:
// MlpCpu::forward_backward and the optimizer step. Data: Fashion-MNIST from --dataset-dir when the
// loader can read it, else random data of the same shape (the table says which; dense math costs
// the same on any values).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <random>

#include <spdlog/spdlog.h>

#include "bench/bench_common.h"
#include "bench/synthetic.h"
#include "kernels/cpu/blas_info.h"
#include "bench/peak_flops.h"
#include "kernels/cpu/ops.h"
#include "trainers/local/local_trainer.h"
#include "models/mlp/mlp.h"
#include "trainers/optim/optimizer.h"

using namespace troupe;
using namespace troupe::bench;

namespace {

// Seconds per call of `fn`, median over `reps` repetitions of `iters` calls each.
template <class Fn>
double time_per_call(Fn&& fn, int reps, int iters) {
  for (int i = 0; i < iters; ++i) fn();  // warm-up
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) fn();
    s.push_back(seconds_since(t0) / iters);
  }
  return median(s);
}

}  // namespace

int main(int argc, char** argv) {
  troupe::kernels::cpu::reexec_for_blas(argv);  // AVX-512 kernels where OpenBLAS fell back
  TrainOptions o;
  o.epochs = 1;
  o.evaluate_each_epoch = false;
  o.dataset_dir = TROUPE_DEFAULT_DATASET_DIR;
  int runs = 5, warmup_steps = 20;
  int64_t steps = 100;
  bool force_synthetic = false;
  std::string json_path;
  CLI::App app{"Single-worker CPU training throughput of the MLP, vs the core's measured FMA peak"};
  app.add_option("--runs", runs, "Timed training jobs (median and best are reported)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--steps", steps, "Steps per job")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--warmup-steps", warmup_steps, "Steps of the untimed warm-up job")
      ->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Examples per step")->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--hidden", o.hidden, "Hidden layer sizes")->delimiter(',')->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd, adam or adamw")->capture_default_str();
  app.add_option("--threads", o.cpu_threads, "OpenBLAS threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--dataset-dir", o.dataset_dir, "Fashion-MNIST directory")->capture_default_str();
  app.add_flag("--synthetic", force_synthetic, "Use random data even when Fashion-MNIST is readable");
  app.add_option("--json", json_path, "Also write the results to this JSON file");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // one job per run: keep the table readable

  // Data: the real training set, or random data with enough examples for one epoch of `steps`.
  Dataset train, test;
  std::string data_note;
  auto real = force_synthetic ? Expected<Dataset>(unavailable("--synthetic")) : load_fashion_mnist(o.dataset_dir, Split::train);
  const int64_t needed = static_cast<int64_t>(o.batch_size) * (std::max<int64_t>(steps, warmup_steps) + 1);
  if (real.ok() && real->count >= needed) {
    train = std::move(*real);
    data_note = "Fashion-MNIST train split from " + o.dataset_dir;
  } else {
    train = synthetic_images(needed, 1);
    data_note = "synthetic random 28x28 images, 10 classes (" +
                (real.ok() ? std::string("dataset too small for --steps") : real.status().message()) + ")";
  }
  test = synthetic_images(o.batch_size, 2);  // evaluation is not timed; keep it short

  std::vector<int> dims{784};
  dims.insert(dims.end(), o.hidden.begin(), o.hidden.end());
  dims.push_back(10);
  auto layout = MlpLayout::make(dims);
  if (!layout.ok()) {
    std::fprintf(stderr, "error: %s\n", layout.status().to_string().c_str());
    return 2;
  }
  const double flop_per_sample = layout->flops_per_sample();
  std::vector<PeakFlops> isas;
  const PeakFlops peak = measure_machine_peak(&isas);

  // Warm-up job, then the timed jobs.
  TrainOptions warm = o;
  warm.max_steps = warmup_steps;
  auto w = train_mlp_cpu(warm, train, test);
  if (!w.ok()) {
    std::fprintf(stderr, "error: %s\n", w.status().to_string().c_str());
    return 2;
  }
  o.max_steps = steps;
  std::vector<double> rates;
  for (int r = 0; r < runs; ++r) {
    auto res = train_mlp_cpu(o, train, test);
    if (!res.ok() || res->steps != steps) {
      std::fprintf(stderr, "error: training job %d failed: %s\n", r + 1,
                   res.ok() ? "it ran a different number of steps" : res.status().to_string().c_str());
      return 1;
    }
    rates.push_back(res->samples_per_second);
  }

  // Breakdown of one step on the same shapes: forward + backward, and the optimizer update.
  MlpCpu model(*layout);
  std::vector<float> params(layout->param_count), grads(layout->param_count);
  mlp_init(*layout, 1, params.data());
  OptimizerOptions oo;
  oo.name = o.optimizer;
  oo.lr = 1e-6f;  // tiny: thousands of timed steps must not drive the parameters anywhere odd
  auto opt = make_optimizer(oo, layout->param_count);
  if (!opt.ok()) {
    std::fprintf(stderr, "error: %s\n", opt.status().to_string().c_str());
    return 2;
  }
  const double fb_s = time_per_call(
      [&] { model.forward_backward(params.data(), train.images.data(), train.labels.data(), o.batch_size, grads.data(), nullptr); },
      7, 50);
  const double opt_s = time_per_call([&] { (*opt)->step(params.data(), grads.data()); }, 7, 50);

  const double med = median(rates), top = best(rates);
  const double gflops = med * flop_per_sample * 1e-9;
  const double step_ms = o.batch_size / med * 1e3;
  std::printf("command: %s\n", command_line(argc, argv).c_str());
  std::printf("cpu:     %s\n", cpu_model().c_str());
  std::printf("blas:    %s, %d thread(s)\n", blas_description().c_str(), o.cpu_threads);
  std::printf("peak:    ");
  for (const auto& p : isas) std::printf("%s %.1f GFLOP/s  ", p.isa.c_str(), p.gflops);
  std::printf("\ndata:    %s\n", data_note.c_str());
  std::printf("model:   mlp %s, batch %d, %s lr %g (%s); %.2f MFLOP per sample per step\n\n",
              layout->to_string().c_str(), o.batch_size, o.optimizer.c_str(), o.effective_lr(), o.lr_schedule.c_str(),
              flop_per_sample * 1e-6);
  std::printf("| measure | value |\n|---|---:|\n");
  std::printf("| samples/s, median of %d jobs x %lld steps | %.0f |\n", runs, static_cast<long long>(steps), med);
  std::printf("| samples/s, best | %.0f |\n", top);
  std::printf("| ms per step (median) | %.3f |\n", step_ms);
  std::printf("| achieved GFLOP/s | %.1f |\n", gflops);
  std::printf("| %% of %s peak (%.1f GFLOP/s) | %.0f%% |\n", peak.isa.c_str(), peak.gflops, 100.0 * gflops / peak.gflops);
  std::printf("| ms: forward_backward alone | %.3f |\n", fb_s * 1e3);
  std::printf("| ms: optimizer step alone | %.3f |\n", opt_s * 1e3);
  std::printf("| ms: rest of the step (batch gather, loop) | %.3f |\n", step_ms - (fb_s + opt_s) * 1e3);

  if (!json_path.empty()) {
    nlohmann::json j;
    j["command"] = command_line(argc, argv);
    j["cpu"] = cpu_model();
    j["blas"] = blas_description();
    j["data"] = data_note;
    j["model"] = layout->to_string();
    j["batch_size"] = o.batch_size;
    j["optimizer"] = o.optimizer;
    for (const auto& p : isas) j["peak_gflops"][p.isa] = p.gflops;
    j["samples_per_second"] = {{"median", med}, {"best", top}, {"runs", rates}};
    j["achieved_gflops"] = gflops;
    j["percent_of_peak"] = 100.0 * gflops / peak.gflops;
    j["ms"] = {{"step", step_ms}, {"forward_backward", fb_s * 1e3}, {"optimizer", opt_s * 1e3}};
    if (!write_json(json_path, j)) return 2;
  }
  return 0;
}
