// Helpers shared by the numeric tests (kernels, trainers): seeded random buffers, element-wise
// comparisons that name the first index that differs, and central-difference gradients.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace troupe::testing {

// n floats uniform in [lo, hi), the same for the same seed on every platform we build on.
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b||: how far one parameter vector is from another, relative to its size (element-wise
// ratios are meaningless for parameters that pass through zero). The measure of the equivalence
// tests (replicas, parameter servers, accumulation against one process).
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// Empty when |got[i] - want[i]| <= atol + rtol * |want[i]| for all i; otherwise a description of the
// first element that is not (index, both values), for use as REQUIRE(close(...) == "").
template <class Want>
std::string first_difference(const float* got, const Want* want, size_t n, double rtol, double atol) {
  for (size_t i = 0; i < n; ++i) {
    const double w = static_cast<double>(want[i]);
    const double g = static_cast<double>(got[i]);
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      std::ostringstream os;
      os << "element " << i << " of " << n << ": got " << g << ", want " << w << " (rtol " << rtol << ", atol "
         << atol << ")";
      return os.str();
    }
  }
  return {};
}

template <class Want>
std::string first_difference(const std::vector<float>& got, const std::vector<Want>& want, double rtol, double atol) {
  if (got.size() != want.size()) return "sizes differ";
  return first_difference(got.data(), want.data(), got.size(), rtol, atol);
}

// Central difference (f(x + eps) - f(x - eps)) / (2 eps) of `loss` with respect to *x, restoring
// *x afterwards. The truncation error is O(eps^2); the rounding error is about
// ulp(loss) / eps, which is why callers pick eps ~1e-2..1e-3 in f32 and compare with a tolerance.
inline double central_difference(float* x, float eps, const std::function<double()>& loss) {
  const float saved = *x;
  *x = saved + eps;
  const double up = loss();
  *x = saved - eps;
  const double down = loss();
  *x = saved;
  // The step actually taken in f32 (saved +- eps is rounded), not the nominal 2 * eps.
  const double step = static_cast<double>(saved + eps) - static_cast<double>(saved - eps);
  return (up - down) / step;
}

// True when `numeric` and `analytic` agree to |a - n| <= atol + rtol * max(|a|, |n|).
inline bool gradients_agree(double numeric, double analytic, double rtol, double atol) {
  return std::fabs(numeric - analytic) <= atol + rtol * std::fmax(std::fabs(numeric), std::fabs(analytic));
}

}  // namespace troupe::testing
