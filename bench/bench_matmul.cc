// bench_matmul: single-core f32 matrix-multiply throughput (kernels::cpu::matmul, i.e. OpenBLAS
// sgemm) at the shapes of the MLP 784-256-128-10 with batch 128, forward and backward, plus a
// 1024^3 square, each as a percentage of the measured FMA peak of the core (bench/peak_flops.h).
//
//   build/bin/bench_matmul                    # table for docs/benchmarks.md
//   build/bin/bench_matmul --reps 11 --json matmul.json
//
// Shaped like nccl-tests: one record per case, one driver that times it (median and best of
// --reps repetitions of at least --min-time seconds each) and checks the result it timed against
// a double-precision dot product on sampled elements.
#include <CLI/CLI.hpp>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <random>

#include "bench/bench_common.h"
#include "kernels/cpu/blas_info.h"
#include "bench/peak_flops.h"
#include "kernels/cpu/ops.h"

namespace cpu = troupe::kernels::cpu;
using namespace troupe::bench;

namespace {

struct Case {
  const char* name;  // what the product is in the MLP step
  bool trans_a, trans_b;
  int m, n, k;
  bool in_mlp_step;  // part of one training step of the MLP (summed into the "MLP step" row)
};

// Batch B = 128 through 784-256-128-10. Forward: H = X W (m = B, n = out, k = in). Weight
// gradient: dW = X^T dY (trans_a, m = in, n = out, k = B). Input gradient of layers 2 and 3:
// dX = dY W^T (trans_b, m = B, n = in, k = out); MlpCpu skips it for layer 1.
const Case kCases[] = {
    {"fwd  L1 X[128x784] W[784x256]", false, false, 128, 256, 784, true},
    {"fwd  L2 H[128x256] W[256x128]", false, false, 128, 128, 256, true},
    {"fwd  L3 H[128x128] W[128x10]", false, false, 128, 10, 128, true},
    {"dW   L1 X^T dY", true, false, 784, 256, 128, true},
    {"dW   L2 H^T dY", true, false, 256, 128, 128, true},
    {"dW   L3 H^T dY", true, false, 128, 10, 128, true},
    {"dX   L2 dY W^T", false, true, 128, 256, 128, true},
    {"dX   L3 dY W^T", false, true, 128, 128, 10, true},
    {"square 1024^3", false, false, 1024, 1024, 1024, false},
};

struct Result {
  std::vector<double> seconds;  // per call, one entry per repetition
  bool correct = false;
  std::string error;
};

std::vector<float> random_matrix(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Compares 64 sampled elements of C = op(A) op(B) with a double dot product, within the f32
// worst-case bound (k + 2) * FLT_EPSILON * sum |a b|.
bool check(const Case& c, const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& out,
           std::string* error) {
  std::mt19937_64 rng(7);
  for (int s = 0; s < 64; ++s) {
    const int i = static_cast<int>(rng() % c.m), j = static_cast<int>(rng() % c.n);
    double acc = 0, mag = 0;
    for (int p = 0; p < c.k; ++p) {
      const double av = c.trans_a ? a[static_cast<size_t>(p) * c.m + i] : a[static_cast<size_t>(i) * c.k + p];
      const double bv = c.trans_b ? b[static_cast<size_t>(j) * c.k + p] : b[static_cast<size_t>(p) * c.n + j];
      acc += av * bv;
      mag += std::fabs(av * bv);
    }
    const double got = out[static_cast<size_t>(i) * c.n + j];
    if (!(std::fabs(got - acc) <= (c.k + 2) * FLT_EPSILON * mag)) {
      *error = "C[" + std::to_string(i) + "," + std::to_string(j) + "] = " + std::to_string(got) + ", want " +
               std::to_string(acc);
      return false;
    }
  }
  return true;
}

Result run_case(const Case& c, int reps, double min_time) {
  auto a = random_matrix(static_cast<size_t>(c.m) * c.k, 1);
  auto b = random_matrix(static_cast<size_t>(c.k) * c.n, 2);
  std::vector<float> out(static_cast<size_t>(c.m) * c.n);
  auto call = [&] { cpu::matmul(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a.data(), b.data(), 0.0f, out.data()); };
  // Warm-up and calibration: enough calls per repetition to last min_time.
  int64_t iters = 1;
  for (;;) {
    auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) call();
    const double s = seconds_since(t0);
    if (s >= min_time / 4) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(iters * min_time / s));
      break;
    }
    iters *= 4;
  }
  Result r;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) call();
    r.seconds.push_back(seconds_since(t0) / static_cast<double>(iters));
  }
  r.correct = check(c, a, b, out, &r.error);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::kernels::cpu::reexec_for_blas(argv);  // AVX-512 kernels where OpenBLAS fell back
  int reps = 7, threads = 1;
  double min_time = 0.05;
  std::string json_path;
  CLI::App app{"f32 matmul (OpenBLAS sgemm) throughput at the MLP's shapes vs the core's measured FMA peak"};
  app.add_option("--reps", reps, "Timed repetitions per case (median and best are reported)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--min-time", min_time, "Seconds each repetition lasts at least")
      ->check(CLI::Range(1e-4, 60.0))->capture_default_str();
  app.add_option("--threads", threads, "OpenBLAS threads (1: one core, as a worker uses)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--json", json_path, "Also write the results to this JSON file");
  CLI11_PARSE(app, argc, argv);
  cpu::set_blas_threads(threads);

  std::vector<PeakFlops> isas;
  const PeakFlops peak = measure_machine_peak(&isas);
  std::printf("command: %s\n", command_line(argc, argv).c_str());
  std::printf("cpu:     %s\n", cpu_model().c_str());
  std::printf("blas:    %s, %d thread(s)\n", blas_description().c_str(), threads);
  std::printf("peak:    ");
  for (const auto& p : isas) std::printf("%s %.1f GFLOP/s  ", p.isa.c_str(), p.gflops);
  std::printf("(best of 5; one core, FMA loop)\n\n");
  std::printf("| case | op | m | n | k | median GFLOP/s | best GFLOP/s | %% of %s peak | check |\n", peak.isa.c_str());
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|\n");

  nlohmann::json j;
  j["command"] = command_line(argc, argv);
  j["cpu"] = cpu_model();
  j["blas"] = blas_description();
  j["threads"] = threads;
  for (const auto& p : isas) j["peak_gflops"][p.isa] = p.gflops;
  bool all_ok = true;
  double step_seconds = 0, step_flop = 0;
  for (const Case& c : kCases) {
    Result r = run_case(c, reps, min_time);
    const double flop = 2.0 * c.m * c.n * c.k;
    std::vector<double> rates;
    for (double s : r.seconds) rates.push_back(flop / s * 1e-9);
    const double med = median(rates);
    const char* op = c.trans_a ? (c.trans_b ? "TT" : "TN") : (c.trans_b ? "NT" : "NN");
    std::printf("| %s | %s | %d | %d | %d | %.1f | %.1f | %.0f%% | %s |\n", c.name, op, c.m, c.n, c.k, med,
                best(rates), 100.0 * med / peak.gflops, r.correct ? "ok" : r.error.c_str());
    all_ok = all_ok && r.correct;
    if (c.in_mlp_step) {
      step_seconds += median(r.seconds);
      step_flop += flop;
    }
    j["cases"].push_back({{"name", c.name}, {"op", op}, {"m", c.m}, {"n", c.n}, {"k", c.k},
                          {"median_gflops", med}, {"best_gflops", best(rates)},
                          {"percent_of_peak", 100.0 * med / peak.gflops}, {"correct", r.correct}});
  }
  const double step_gflops = step_flop / step_seconds * 1e-9;
  std::printf("| MLP step: the 8 GEMMs above | | | | | %.1f | | %.0f%% | |\n", step_gflops,
              100.0 * step_gflops / peak.gflops);
  std::printf("\nMLP step GEMMs: %.3f ms per batch of 128 (%.2f GFLOP)\n", step_seconds * 1e3, step_flop * 1e-9);
  j["mlp_step"] = {{"gemm_ms", step_seconds * 1e3}, {"gflops", step_gflops}};
  if (!json_path.empty() && !write_json(json_path, j)) return 2;
  if (!all_ok) {
    std::fprintf(stderr, "error: a matmul result was wrong (see the check column)\n");
    return 1;
  }
  return 0;
}
