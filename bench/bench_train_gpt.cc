// bench_train_gpt: one core training the GPT (models/gpt/): tokens/s and model FLOP/s against the
// core's measured FMA peak (bench/peak_flops.h), at dims 128 and 384 (6 layers, 6 heads, context
// 256, a byte vocabulary of 256, --batch windows per step, adamw).
//
//   build/bin/bench_train_gpt                      # the table for docs/benchmarks.md
//   build/bin/bench_train_gpt --dims 384 --steps 5 --batch 4
//
// A step is the model's forward and backward (models/gpt/gpt_model.h) and the optimizer's update
// over the flat buffers, the same calls the runtime's loop makes, without its data feed. Model
// FLOPs per token: 6 x the matrices' parameters + 12 x layers x dim x context (GptModel::
// flops_per_token). Times are the training thread's CPU time (the host may be shared: wall time is
// printed beside it); the breakdown times the attention kernels, the GEMMs and the rest of one
// step separately.
#include <CLI/CLI.hpp>

#include <time.h>

#include <cstdio>
#include <random>

#include "bench/bench_common.h"
#include "bench/peak_flops.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/transformer.h"
#include "models/gpt/gpt_model.h"
#include "trainers/optim/optimizer.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using namespace troupe::bench;

namespace {

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timed {
  double cpu = 0, wall = 0;
};

template <class Fn>
Timed best_of(int reps, Fn&& fn) {
  Timed best{1e300, 1e300};
  for (int r = 0; r < reps; ++r) {
    const double c0 = thread_seconds();
    const auto w0 = Clock::now();
    fn();
    best.cpu = std::min(best.cpu, thread_seconds() - c0);
    best.wall = std::min(best.wall, seconds_since(w0));
  }
  return best;
}

// The core's FMA peak by the training thread's CPU time, as the steps are timed (on a shared host
// a wall-clock peak is whatever share of the core the scheduler gave): peak_flops.h's loop for the
// best instruction set, best of 7 runs of ~0.2 s.
PeakFlops cpu_time_peak() {
  PeakFlops p;
  float (*loop)(int64_t) = troupe::bench::detail::fma_loop_sse2;
  double flop_per_iter = 2.0 * 4 * 12;
  p.isa = "sse2";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    loop = troupe::bench::detail::fma_loop_avx512, flop_per_iter = 2.0 * 16 * 16, p.isa = "avx512f";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    loop = troupe::bench::detail::fma_loop_avx2, flop_per_iter = 2.0 * 8 * 12, p.isa = "avx2+fma";
  }
  volatile float sink = 0;
  int64_t iters = 1 << 20;
  for (double s = 0; s < 0.05; iters *= 2) {
    const double t0 = thread_seconds();
    sink = sink + loop(iters);
    s = thread_seconds() - t0;
  }
  for (int r = 0; r < 7; ++r) {
    const double t0 = thread_seconds();
    sink = sink + loop(iters);
    p.gflops = std::max(p.gflops, flop_per_iter * static_cast<double>(iters) / (thread_seconds() - t0) / 1e9);
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  kernels::cpu::reexec_for_blas(argv);  // AVX-512 kernels where OpenBLAS fell back
  CLI::App app{"One core training the gpt: tokens/s and FLOP/s against the core's FMA peak"};
  std::vector<int64_t> dims{128, 384};
  int64_t layers = 6, heads = 6, context = 256, vocab = 256, batch = 4;
  int steps = 4;
  app.add_option("--dims", dims, "Model widths to measure")->delimiter(',');
  app.add_option("--layers", layers);
  app.add_option("--heads", heads);
  app.add_option("--context", context);
  app.add_option("--batch", batch, "Windows of --context tokens per step");
  app.add_option("--steps", steps, "Timed steps (the best is reported) after one warm-up");
  CLI11_PARSE(app, argc, argv);
  kernels::cpu::set_blas_threads(1);
  kernels::cpu::ScopedFlushDenormals flush;
  const PeakFlops peak = cpu_time_peak();
  std::printf("# one core, %s FMA peak %.1f GFLOP/s (OpenBLAS %s); %ld windows x %ld tokens per step, best of %d steps\n",
              peak.isa.c_str(), peak.gflops, kernels::cpu::blas_corename().c_str(), static_cast<long>(batch),
              static_cast<long>(context), steps);
  std::printf("| dim | heads | params | step (CPU s) | step (wall s) | tokens/s | model GFLOP/s | %% of peak | attention | GEMMs | rest |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t dim : dims) {
    // Heads of 64 values when --heads does not divide the width (6 does not divide 128).
    const int64_t h = dim % heads == 0 ? heads : std::max<int64_t>(1, dim / 64);
    auto c = models::GptConfig::from(JobConfig({{"layers", std::to_string(layers)}, {"heads", std::to_string(h)},
                                                {"dim", std::to_string(dim)}, {"vocab", std::to_string(vocab)}}),
                                     context, vocab);
    if (!c.ok()) return std::fprintf(stderr, "error: %s\n", c.status().to_string().c_str()), 2;
    models::GptModel model(*c);
    ParameterSpace space;
    model.declare(space);
    std::vector<float> params(space.size()), grads(space.size());
    init_parameters(space, 1, params.data());
    OptimizerOptions oo;
    oo.name = "adamw";
    oo.lr = 1e-4f;
    oo.weight_decay = 0.1f;
    oo.decay_matrices_only = true;
    oo.decay_ranges = matrix_ranges(space);
    oo.decay_ranges_set = true;
    auto opt = make_optimizer(oo, space.size());
    if (!opt.ok()) return std::fprintf(stderr, "error: %s\n", opt.status().to_string().c_str()), 2;
    std::mt19937_64 rng(2);
    const int64_t n = batch * context;
    std::vector<int32_t> tokens(static_cast<size_t>(n)), targets(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>(rng() % vocab), targets[i] = static_cast<int32_t>(rng() % vocab);
    const Parameters p(params.data(), params.size());
    Gradients g(grads.data(), grads.size());
    bool failed = false;
    auto step = [&] {
      std::fill(grads.begin(), grads.end(), 0.0f);
      auto loss = model.forward(tokens, targets.data(), batch, context, p);
      if (!loss.ok() || !std::isfinite(*loss)) failed = true;
      model.backward(p, g, 1.0f);
      (*opt)->step(params.data(), grads.data());
    };
    step();  // warm-up: buffers allocated, pages touched
    const Timed t = best_of(steps, step);
    if (failed) return std::fprintf(stderr, "error: the loss of dim %ld is not finite\n", static_cast<long>(dim)), 1;
    // Breakdown: the attention kernels of every layer, forward and backward, on this shape.
    const kernels::cpu::AttentionShape shape{batch, context, h, dim};
    std::vector<float> qkv(static_cast<size_t>(n * 3 * dim)), probs(static_cast<size_t>(batch * h * context * context)),
        out(static_cast<size_t>(n * dim)), dqkv(qkv.size()), scratch(static_cast<size_t>(context * context));
    for (auto& v : qkv) v = static_cast<float>(rng() % 1000) * 1e-3f - 0.5f;
    const Timed att = best_of(steps, [&] {
      for (int64_t l = 0; l < layers; ++l) {
        kernels::cpu::attention_forward(qkv.data(), shape, probs.data(), out.data());
        kernels::cpu::attention_backward(qkv.data(), probs.data(), out.data(), shape, dqkv.data(), scratch.data());
      }
    });
    // The GEMMs of a step: the matrices' 6 FLOPs per parameter per token, timed as the same products.
    std::vector<float> a(static_cast<size_t>(n * 4 * dim), 0.01f), b(static_cast<size_t>(4 * dim * dim), 0.01f),
        y(static_cast<size_t>(n * 4 * dim));
    auto mm = [&](int64_t in, int64_t outw) {  // forward, weight gradient, input gradient of one linear
      kernels::cpu::matmul(false, false, static_cast<int>(n), static_cast<int>(outw), static_cast<int>(in), 1, a.data(), b.data(), 0, y.data());
      kernels::cpu::matmul(true, false, static_cast<int>(in), static_cast<int>(outw), static_cast<int>(n), 1, a.data(), y.data(), 1, b.data());
      kernels::cpu::matmul(false, true, static_cast<int>(n), static_cast<int>(in), static_cast<int>(outw), 1, y.data(), b.data(), 0, a.data());
    };
    std::vector<float> head(static_cast<size_t>(vocab * dim), 0.01f);
    const Timed gemm = best_of(steps, [&] {
      for (int64_t l = 0; l < layers; ++l) {
        mm(dim, 3 * dim);
        mm(dim, dim);
        mm(dim, 4 * dim);
        mm(4 * dim, dim);
      }
      mm(dim, vocab);
    });
    const double flops = model.flops_per_token() * static_cast<double>(n);
    const double gflops = flops / t.cpu / 1e9;
    std::printf("| %ld | %ld | %.2fM | %.3f | %.3f | %.0f | %.1f | %.0f%% | %.0f%% | %.0f%% | %.0f%% |\n", static_cast<long>(dim), static_cast<long>(h),
                static_cast<double>(space.size()) / 1e6, t.cpu, t.wall, static_cast<double>(n) / t.cpu, gflops,
                100.0 * gflops / peak.gflops, 100.0 * att.cpu / t.cpu, 100.0 * gemm.cpu / t.cpu,
                100.0 * std::max(0.0, t.cpu - att.cpu - gemm.cpu) / t.cpu);
  }
  return 0;
}
