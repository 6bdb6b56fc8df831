// Vector ops for collectives: sum_into, max_into, scale, the f16/bf16 accumulations and
// conversions (round trips, rounding to nearest even, special values), all_finite.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The value of bf16 bits `h` in double, with the all-ones exponent read as 2^128 (what IEEE rounding
// compares against before it overflows to infinity).
double bf16_value_unbounded(uint16_t h) {
  if ((h & 0x7f80u) == 0x7f80u) return (h & 0x8000u) ? -std::ldexp(1.0, 128) : std::ldexp(1.0, 128);
  return from_bits(static_cast<uint32_t>(h) << 16);
}

// bf16 rounding reference in double: the two bf16 neighbours of x (truncation and the next value
// up in magnitude), the nearer one, ties to the even mantissa. Infinities map to themselves.
uint16_t reference_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t lo = static_cast<uint16_t>(u >> 16), hi = static_cast<uint16_t>(lo + 1);
  if (std::isinf(x)) return lo;
  const double dlo = std::fabs(bf16_value_unbounded(lo) - x);
  const double dhi = std::fabs(bf16_value_unbounded(hi) - x);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) ? hi : lo;
}

}  // namespace

TEST_CASE("sum_into, max_into and scale compute element-wise", "[vector_ops]") {
  const size_t n = 131;
  auto a = random_floats(n, 1), b = random_floats(n, 2);
  std::vector<float> sum = a, mx = a, sc = a, want_sum(n), want_max(n), want_sc(n);
  for (size_t i = 0; i < n; ++i) {
    want_sum[i] = a[i] + b[i];
    want_max[i] = a[i] > b[i] ? a[i] : b[i];
    want_sc[i] = a[i] * -1.5f;
  }
  cpu::sum_into(sum.data(), b.data(), n);
  cpu::max_into(mx.data(), b.data(), n);
  cpu::scale(sc.data(), n, -1.5f);
  // One correctly rounded f32 operation per element: results are exact.
  REQUIRE(first_difference(sum, want_sum, 0, 0) == "");
  REQUIRE(first_difference(mx, want_max, 0, 0) == "");
  REQUIRE(first_difference(sc, want_sc, 0, 0) == "");
}

TEST_CASE("sum_into_f16 and sum_into_bf16 accumulate the decoded values in f32", "[vector_ops]") {
  const size_t n = 77;
  auto a = random_floats(n, 3), b = random_floats(n, 4, -100.0f, 100.0f);
  std::vector<uint16_t> h(n), bh(n);
  std::vector<float> want_h(n), want_b(n);
  for (size_t i = 0; i < n; ++i) {
    h[i] = troupe::f32_to_f16(b[i]);
    bh[i] = troupe::f32_to_bf16(b[i]);
    want_h[i] = a[i] + troupe::f16_to_f32(h[i]);
    want_b[i] = a[i] + troupe::bf16_to_f32(bh[i]);
  }
  std::vector<float> dh = a, db = a;
  cpu::sum_into_f16(dh.data(), h.data(), n);
  cpu::sum_into_bf16(db.data(), bh.data(), n);
  REQUIRE(first_difference(dh, want_h, 0, 0) == "");
  REQUIRE(first_difference(db, want_b, 0, 0) == "");
  // Known values: 0x3c00 is 1.0 in f16, 0x3f80 is 1.0 in bf16, 0xc000 is -2.0 in f16.
  float x[2] = {0.5f, 0.5f};
  const uint16_t one_f16[2] = {0x3c00, 0xc000}, one_bf16[2] = {0x3f80, 0xc000};
  cpu::sum_into_f16(x, one_f16, 2);
  REQUIRE(x[0] == 1.5f);
  REQUIRE(x[1] == -1.5f);
  cpu::sum_into_bf16(x, one_bf16, 2);
  REQUIRE(x[0] == 2.5f);
  REQUIRE(x[1] == -3.5f);  // 0xc000 in bf16 is -2.0 as well
}

TEST_CASE("every f16 value survives f16 -> f32 -> f16 unchanged", "[vector_ops][convert]") {
  std::vector<uint16_t> all(65536), back(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(65536);
  cpu::f16_to_f32(all.data(), f.data(), all.size());
  cpu::f32_to_f16(f.data(), back.data(), f.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    const bool nan = (i & 0x7c00u) == 0x7c00u && (i & 0x3ffu) != 0;
    INFO("f16 bits 0x" << std::hex << i);
    if (nan) {
      REQUIRE(std::isnan(f[i]));
      REQUIRE(((back[i] & 0x7c00u) == 0x7c00u && (back[i] & 0x3ffu) != 0));
    } else {
      REQUIRE(back[i] == all[i]);
    }
  }
}

TEST_CASE("every bf16 value survives bf16 -> f32 -> bf16 unchanged", "[vector_ops][convert]") {
  std::vector<uint16_t> all(65536), back(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(65536);
  cpu::bf16_to_f32(all.data(), f.data(), all.size());
  cpu::f32_to_bf16(f.data(), back.data(), f.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    INFO("bf16 bits 0x" << std::hex << i);
    if (std::isnan(f[i])) {
      REQUIRE(std::isnan(troupe::bf16_to_f32(back[i])));  // NaN stays NaN (payload may be quieted)
    } else {
      REQUIRE(back[i] == all[i]);
    }
  }
}

TEST_CASE("f32 -> f16 and bf16 keep special values and round to nearest even", "[vector_ops][convert]") {
  const float in[] = {0.0f,  -0.0f, kInf, -kInf, 65504.0f, 65519.0f, 65520.0f, 1e6f,
                      5.9604644775390625e-8f /* 2^-24 */, 2.98023223876953125e-8f /* 2^-25: tie */,
                      8.940696716308594e-8f /* 1.5 * 2^-24: tie */, 1.00048828125f /* 1 + 2^-11: tie */,
                      1.00146484375f /* 1 + 3 * 2^-11: tie */};
  const uint16_t want[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7bff, 0x7bff, 0x7c00, 0x7c00,
                           0x0001, 0x0000, 0x0002, 0x3c00, 0x3c02};
  const size_t n = sizeof(in) / sizeof(in[0]);
  std::vector<uint16_t> got(n);
  cpu::f32_to_f16(in, got.data(), n);
  for (size_t i = 0; i < n; ++i) {
    INFO("input " << in[i]);
    REQUIRE(got[i] == want[i]);
  }
  uint16_t nan16 = 0, nanbf = 0;
  cpu::f32_to_f16(&kNaN, &nan16, 1);
  cpu::f32_to_bf16(&kNaN, &nanbf, 1);
  REQUIRE(std::isnan(troupe::f16_to_f32(nan16)));
  REQUIRE(std::isnan(troupe::bf16_to_f32(nanbf)));

  // bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (goes to 1); 1 + 3 * 2^-8 goes up to 1 + 2^-6.
  // The largest finite f32 rounds up to infinity; infinities and signed zeros stay.
  const float bin[] = {1.00390625f, 1.01171875f, std::numeric_limits<float>::max(), -kInf, -0.0f};
  const uint16_t bwant[] = {0x3f80, 0x3f82, 0x7f80, 0xff80, 0x8000};
  std::vector<uint16_t> bgot(5);
  cpu::f32_to_bf16(bin, bgot.data(), 5);
  for (size_t i = 0; i < 5; ++i) {
    INFO("input " << bin[i]);
    REQUIRE(bgot[i] == bwant[i]);
  }
}

TEST_CASE("f32 -> f16 and bf16 agree with independent rounding over a sweep of f32 bit patterns",
          "[vector_ops][convert]") {
  // Every 2039th f32 bit pattern (~2.1 million values: all exponents, both signs, subnormals).
  // f16 is checked against GCC's _Float16 conversion (correctly rounded), bf16 against a
  // nearest-of-two-neighbours search in double.
  std::vector<float> x;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 2039) {
    float f = from_bits(static_cast<uint32_t>(u));
    if (!std::isnan(f)) x.push_back(f);
  }
  std::vector<uint16_t> h(x.size()), b(x.size());
  cpu::f32_to_f16(x.data(), h.data(), x.size());
  cpu::f32_to_bf16(x.data(), b.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("input " << x[i]);
    REQUIRE(b[i] == reference_bf16(x[i]));
#ifdef __FLT16_MAX__
    volatile float in = x[i];
    _Float16 ref = static_cast<_Float16>(in);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    REQUIRE(h[i] == ref_bits);
#endif
  }
}

TEST_CASE("all_finite finds one infinity or NaN anywhere", "[vector_ops]") {
  auto x = random_floats(100, 5);
  REQUIRE(cpu::all_finite(x.data(), x.size()));
  REQUIRE(cpu::all_finite(nullptr, 0));
  for (size_t pos : {size_t{0}, size_t{50}, size_t{99}}) {
    for (float bad : {kInf, -kInf, kNaN}) {
      auto y = x;
      y[pos] = bad;
      INFO("position " << pos << " value " << bad);
      REQUIRE_FALSE(cpu::all_finite(y.data(), y.size()));
    }
  }
  const float big[] = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::denorm_min()};
  REQUIRE(cpu::all_finite(big, 3));
}

TEST_CASE("vector ops with n = 0 do nothing", "[vector_ops]") {
  float x = 1.0f;
  uint16_t h = 0x3c00;
  cpu::sum_into(&x, nullptr, 0);
  cpu::max_into(&x, nullptr, 0);
  cpu::scale(&x, 0, 0.0f);
  cpu::sum_into_f16(&x, nullptr, 0);
  cpu::sum_into_bf16(&x, nullptr, 0);
  cpu::f16_to_f32(nullptr, &x, 0);
  cpu::bf16_to_f32(nullptr, &x, 0);
  cpu::f32_to_f16(nullptr, &h, 0);
  cpu::f32_to_bf16(nullptr, &h, 0);
  REQUIRE(x == 1.0f);
  REQUIRE(h == 0x3c00);
}
