// The machine's peak single-core f32 FLOP/s, measured rather than looked up: a loop of independent
// fused multiply-adds that keeps every FMA pipe busy and touches no memory. Benchmarks report
// their throughput as a percentage of it.
//
// Each instruction-set variant is compiled for its ISA with a target attribute and only called
// when __builtin_cpu_supports says the CPU has it, so the binary runs anywhere x86-64.
// Accumulators: an FMA has a latency of ~4 cycles and up to 2 issue per cycle, so at least 8
// independent chains are needed to saturate the pipes; we use 16 (12 for AVX2, which has only 16
// registers).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace troupe::bench {

struct PeakFlops {
  std::string isa;          // "avx512f", "avx2+fma" or "sse2"
  double gflops = 0;        // best of the repetitions (a ceiling, so the best is the estimate)
  double median_gflops = 0;
};

namespace detail {

// Each function runs `iters` rounds of A independent FMAs on L lanes (2 * A * L FLOP per round)
// and returns a value depending on every accumulator so the compiler cannot drop any.
__attribute__((target("avx512f"))) inline float fma_loop_avx512(int64_t iters) {
  constexpr int A = 16;
  __m512 acc[A];
  for (int i = 0; i < A; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < A; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  }
  __m512 s = acc[0];
  for (int i = 1; i < A; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  float total = 0;
  for (float v : out) total += v;
  return total;
}

__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(int64_t iters) {
  constexpr int A = 12;
  __m256 acc[A];
  for (int i = 0; i < A; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < A; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
  }
  __m256 s = acc[0];
  for (int i = 1; i < A; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

// No FMA: a multiply and an add per element (counted as 2 FLOP, as an FMA is).
inline float fma_loop_sse2(int64_t iters) {
  constexpr int A = 12;
  __m128 acc[A];
  for (int i = 0; i < A; ++i) acc[i] = _mm_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m128 mul = _mm_set1_ps(0.999999f), add = _mm_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < A; ++i) acc[i] = _mm_add_ps(_mm_mul_ps(acc[i], mul), add);
  }
  __m128 s = acc[0];
  for (int i = 1; i < A; ++i) s = _mm_add_ps(s, acc[i]);
  float out[4];
  _mm_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3];
}

}  // namespace detail

// ISAs this CPU runs, widest first.
inline std::vector<std::string> supported_isas() {
  std::vector<std::string> isas;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) isas.push_back("avx512f");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isas.push_back("avx2+fma");
  isas.push_back("sse2");
  return isas;
}

// Measures `isa` (one of supported_isas()): `reps` runs of about `seconds_per_rep` each.
inline PeakFlops measure_peak_flops(const std::string& isa, int reps = 5, double seconds_per_rep = 0.1) {
  using Clock = std::chrono::steady_clock;
  int lanes = 4, accumulators = 12;
  float (*loop)(int64_t) = detail::fma_loop_sse2;
  if (isa == "avx512f") {
    lanes = 16, accumulators = 16, loop = detail::fma_loop_avx512;
  } else if (isa == "avx2+fma") {
    lanes = 8, accumulators = 12, loop = detail::fma_loop_avx2;
  }
  const double flop_per_iter = 2.0 * lanes * accumulators;
  // Calibrate the iteration count to the wanted duration (also warms up clocks and caches).
  int64_t iters = 1 << 16;
  volatile float sink = 0;
  for (;;) {
    auto t0 = Clock::now();
    sink = sink + loop(iters);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= seconds_per_rep / 4 || iters > (int64_t{1} << 40)) {
      iters = static_cast<int64_t>(iters * (seconds_per_rep / std::max(s, 1e-9)));
      break;
    }
    iters *= 4;
  }
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    sink = sink + loop(iters);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rates.push_back(flop_per_iter * static_cast<double>(iters) / s * 1e-9);
  }
  std::sort(rates.begin(), rates.end());
  PeakFlops p;
  p.isa = isa;
  p.gflops = rates.back();
  p.median_gflops = rates[rates.size() / 2];
  return p;
}

// The best over every ISA the CPU supports (the widest one is normally the peak).
inline PeakFlops measure_machine_peak(std::vector<PeakFlops>* per_isa = nullptr, int reps = 5) {
  PeakFlops best;
  for (const std::string& isa : supported_isas()) {
    PeakFlops p = measure_peak_flops(isa, reps);
    if (per_isa) per_isa->push_back(p);
    if (p.gflops > best.gflops) best = p;
  }
  return best;
}

}  // namespace troupe::bench
