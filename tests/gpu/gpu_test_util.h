// Helpers of troupe_gpu_tests: device arrays filled from host vectors and read back, seeded random
// data, and the f32 rounding unit the tolerances are written in.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <random>
#include <vector>

#include "kernels/cuda/runtime.h"
#include "data/readers/fashion_mnist.h"
#include "tests/support/numeric_test_util.h"

namespace troupe::test {

constexpr double kF32Eps = 1.1920929e-7;  // unit roundoff of f32 is half of this

// Sizes every element-wise kernel is run at: empty, one, primes (no multiple of a block or of
// four), and large enough for grid-stride loops to wrap.
inline const std::vector<size_t>& test_sizes() {
  static const std::vector<size_t> sizes{0, 1, 7, 31, 257, 1021, 65537, 3000017};
  return sizes;
}

using troupe::testing::random_floats;

// Index of the first element where got and ref differ (NaN matches NaN: GPUs return the canonical
// NaN where x86 keeps an operand's payload), or -1. Use instead of CHECK(got == ref) on large
// vectors: Catch would print millions of elements.
template <class T>
long first_mismatch(const std::vector<T>& got, const std::vector<T>& ref) {
  if (got.size() != ref.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = got[i] != got[i] && ref[i] != ref[i];
    if (!(got[i] == ref[i]) && !both_nan) return static_cast<long>(i);
  }
  return -1;
}

// CHECKs that two vectors are equal, reporting the first differing element.
#define CHECK_SAME(got_expr, ref_expr)                                                           \
  do {                                                                                           \
    const auto& got_ = (got_expr);                                                               \
    const auto& ref_ = (ref_expr);                                                               \
    const long at_ = ::troupe::test::first_mismatch(got_, ref_);                                 \
    if (at_ >= 0 && size_t(at_) < got_.size() && got_.size() == ref_.size()) {                   \
      INFO("first difference at " << at_ << ": " << got_[at_] << " (gpu) vs " << ref_[at_]);    \
    }                                                                                            \
    INFO("sizes " << got_.size() << " and " << ref_.size());                                     \
    CHECK(at_ == -1);                                                                            \
  } while (0)

// A device copy of a host vector (REQUIREs success), read back with host().
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : n_(host.size()) {
    REQUIRE(buf_.allocate(n_, "a test array").ok());
    if (n_) REQUIRE(cudaMemcpy(buf_.get(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  explicit DeviceArray(size_t n) : DeviceArray(std::vector<T>(n)) {}
  T* get() { return buf_.get(); }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    if (n_) REQUIRE(cudaMemcpy(out.data(), buf_.get(), n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  kernels::cuda::DeviceBuffer<T> buf_;
};

// Learnable synthetic data: `classes` random prototypes of `features` values in [0, 1], each
// example a prototype plus uniform noise drawn from `seed`. The prototypes depend on the shape only,
// so a test set drawn with another seed is the same task as its training set (test accuracy means
// something).
inline Dataset synthetic(int64_t count, int side, int classes, uint64_t seed) {
  Dataset d;
  d.count = count;
  d.rows = d.cols = side;
  d.classes = classes;
  const int64_t f = d.features();
  auto protos = test::random_floats(size_t(classes * f), 0x70c1a55u + uint64_t(f) * 31 + uint64_t(classes), 0.0f, 1.0f);
  auto noise = test::random_floats(size_t(count * f), seed + 1, -0.5f, 0.5f);
  d.images.resize(size_t(count * f));
  d.labels.resize(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    const int32_t y = static_cast<int32_t>((i * 7 + i / 3) % classes);
    d.labels[i] = y;
    for (int64_t j = 0; j < f; ++j) d.images[i * f + j] = protos[y * f + j] + noise[i * f + j];
  }
  return d;
}

// Fashion-MNIST from $TROUPE_DATASET_DIR (else the default folder), both splits REQUIREd: the
// accuracy tests users rely on train on the real data.
struct FashionMnist {
  Expected<Dataset> train, test;
};
inline FashionMnist fashion_mnist() {
  const char* env = std::getenv("TROUPE_DATASET_DIR");
  const std::string dir = env && *env ? env : TROUPE_DEFAULT_DATASET_DIR;
  FashionMnist f{load_fashion_mnist(dir, Split::train), load_fashion_mnist(dir, Split::test)};
  INFO("set TROUPE_DATASET_DIR to the folder of the Fashion-MNIST *.gz files (looked in " << dir << ")");
  REQUIRE(f.train.ok());
  REQUIRE(f.test.ok());
  return f;
}

}  // namespace troupe::test
