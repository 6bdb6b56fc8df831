// Vector ops for collectives, conversions, all_finite and gather_rows against the CPU. All of these
// are exact: one rounding per element, done the same way on both sides (the f16/bf16 conversions
// share core/dtype.h), so results must be bit-identical.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/ops.h"

namespace troupe {
namespace {

using test::DeviceArray;
namespace kc = kernels::cuda;

// Bit patterns (so NaNs compare equal to themselves).
std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// Random values across many magnitudes, plus the special ones conversions must keep.
std::vector<float> wide_floats(size_t n, uint64_t seed) {
  auto v = test::random_floats(n, seed, -1.0f, 1.0f);
  std::mt19937_64 rng(seed);
  for (auto& x : v) x = std::ldexp(x, static_cast<int>(rng() % 60) - 40);  // 2^-40 .. 2^19, f16 subnormals too
  const float specials[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 1e-8f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < n && i < 8; ++i) v[i] = specials[i];
  return v;
}

TEST_CASE("cuda sum_into, max_into and scale match the cpu exactly", "[gpu][vector]") {
  for (size_t n : test::test_sizes()) {
    CAPTURE(n);
    auto a = test::random_floats(n, n + 1), b = test::random_floats(n, n + 2);
    DeviceArray<float> da(a), db(b);
    auto ref = a;
    kernels::cpu::sum_into(ref.data(), b.data(), n);
    REQUIRE(kc::sum_into(da.get(), db.get(), n).ok());
    CHECK_SAME(da.host(), ref);
    kernels::cpu::max_into(ref.data(), b.data(), n);
    REQUIRE(kc::max_into(da.get(), db.get(), n).ok());
    CHECK_SAME(da.host(), ref);
    kernels::cpu::scale(ref.data(), n, -0.37f);
    REQUIRE(kc::scale(da.get(), n, -0.37f).ok());
    CHECK_SAME(da.host(), ref);
  }
}

TEST_CASE("cuda f16/bf16 conversions and sums are bit-identical to the cpu", "[gpu][vector]") {
  for (size_t n : test::test_sizes()) {
    CAPTURE(n);
    auto x = wide_floats(n, n + 3);
    DeviceArray<float> dx(x);
    for (bool bf : {false, true}) {
      CAPTURE(bf);
      std::vector<uint16_t> ref16(n);
      (bf ? kernels::cpu::f32_to_bf16 : kernels::cpu::f32_to_f16)(x.data(), ref16.data(), n);
      DeviceArray<uint16_t> d16(n);
      REQUIRE((bf ? kc::f32_to_bf16 : kc::f32_to_f16)(dx.get(), d16.get(), n, nullptr).ok());
      CHECK_SAME(d16.host(), ref16);
      std::vector<float> back(n);
      (bf ? kernels::cpu::bf16_to_f32 : kernels::cpu::f16_to_f32)(ref16.data(), back.data(), n);
      DeviceArray<float> dback(n);
      REQUIRE((bf ? kc::bf16_to_f32 : kc::f16_to_f32)(d16.get(), dback.get(), n, nullptr).ok());
      CHECK_SAME(bits(dback.host()), bits(back));  // conversions keep NaN payloads: bits
      auto acc = test::random_floats(n, n + 9);
      DeviceArray<float> dacc(acc);
      (bf ? kernels::cpu::sum_into_bf16 : kernels::cpu::sum_into_f16)(acc.data(), ref16.data(), n);
      REQUIRE((bf ? kc::sum_into_bf16 : kc::sum_into_f16)(dacc.get(), d16.get(), n, nullptr).ok());
      CHECK_SAME(dacc.host(), acc);  // sums: values (NaN + x gives any NaN)
    }
  }
}

TEST_CASE("cuda all_finite finds a single NaN or infinity anywhere", "[gpu][vector]") {
  for (size_t n : test::test_sizes()) {
    CAPTURE(n);
    auto x = test::random_floats(n, n);
    DeviceArray<int32_t> flag(std::vector<int32_t>{7});
    {
      DeviceArray<float> dx(x);
      REQUIRE(kc::all_finite(dx.get(), n, flag.get()).ok());
      CHECK(flag.host()[0] == 1);  // also for n == 0
    }
    if (n == 0) continue;
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      auto y = x;
      y[n - 1 - n / 3] = bad;
      DeviceArray<float> dy(y);
      REQUIRE(kc::all_finite(dy.get(), n, flag.get()).ok());
      CHECK(flag.host()[0] == 0);
      CHECK_FALSE(kernels::cpu::all_finite(y.data(), n));
    }
  }
}

TEST_CASE("cuda gather_rows copies the indexed rows and labels", "[gpu][gather]") {
  for (int64_t cols : {1, 3, 4, 784, 1021}) {
    CAPTURE(cols);
    const int64_t rows = 301, count = 257;
    auto src = test::random_floats(size_t(rows * cols), cols);
    std::vector<int32_t> labels(rows), index(count);
    for (int64_t r = 0; r < rows; ++r) labels[r] = static_cast<int32_t>(r * 7 % 10);
    std::mt19937_64 rng(cols);
    for (auto& i : index) i = static_cast<int32_t>(rng() % rows);
    DeviceArray<float> dsrc(src), ddst(size_t(count * cols));
    DeviceArray<int32_t> dlab(labels), didx(index), dout{size_t(count)};
    REQUIRE(kc::gather_rows(ddst.get(), dsrc.get(), rows, cols, didx.get(), count, dout.get(), dlab.get()).ok());
    auto got = ddst.host();
    auto got_labels = dout.host();
    for (int64_t r = 0; r < count; ++r) {
      REQUIRE(got_labels[r] == labels[index[r]]);
      for (int64_t c = 0; c < cols; ++c) REQUIRE(got[r * cols + c] == src[index[r] * cols + c]);
    }
  }
  DeviceArray<float> x(4);
  CHECK(kc::gather_rows(x.get(), x.get(), 1, 4, nullptr, 1, nullptr, nullptr).code() == Code::invalid_argument);
}

TEST_CASE("cuda pack_step_slots packs a step's loss and count as the host's casts", "[gpu][vector]") {
  DeviceArray<float> loss(std::vector<float>{0.4375f}), out(std::vector<float>{-1.0f, -1.0f, 7.0f});
  DeviceArray<unsigned long long> correct(std::vector<unsigned long long>{123456789ull});
  REQUIRE(kc::pack_step_slots(loss.get(), correct.get(), out.get()).ok());
  const auto got = out.host();
  CHECK(got[0] == 0.4375f);
  CHECK(got[1] == static_cast<float>(123456789ull));  // rounded to f32 as the host rounds it
  CHECK(got[2] == 7.0f);                              // nothing past the two slots
  CHECK(kc::pack_step_slots(nullptr, correct.get(), out.get()).code() == Code::invalid_argument);
}

}  // namespace
}  // namespace troupe
