// f16 and bf16 conversions: exact values, round-to-nearest-even, subnormals, infinities, NaNs, and
// exhaustive round trips over all 65536 bit patterns.
#include "core/dtype.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

namespace troupe {
namespace {

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }
float next_up(float x) { return std::nextafter(x, std::numeric_limits<float>::infinity()); }
float next_down(float x) { return std::nextafter(x, -std::numeric_limits<float>::infinity()); }
const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("dtype: names, sizes and parsing", "[core][dtype]") {
  CHECK(dtype_size(DType::f32) == 4);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::bf16) == 2);
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    DType back = DType::f32;
    REQUIRE(parse_dtype(dtype_name(t), &back));
    CHECK(back == t);
  }
  DType untouched = DType::bf16;
  CHECK_FALSE(parse_dtype("float32", &untouched));
  CHECK_FALSE(parse_dtype("", &untouched));
  CHECK(untouched == DType::bf16);
}

TEST_CASE("dtype: f16 exact values", "[core][dtype]") {
  CHECK(f32_to_f16(0.0f) == 0x0000);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(-2.0f) == 0xc000);
  CHECK(f32_to_f16(0.5f) == 0x3800);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);               // largest finite f16
  CHECK(f32_to_f16(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(f32_to_f16(std::ldexp(1023.0f, -24)) == 0x03ff);  // largest subnormal
  CHECK(f16_to_f32(0x3c00) == 1.0f);
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(f16_to_f32(0x3555) == 0.333251953125f);
  CHECK(std::signbit(f16_to_f32(0x8000)));
  CHECK(f16_to_f32(0x8000) == 0.0f);
}

TEST_CASE("dtype: f16 rounds to nearest, ties to even", "[core][dtype]") {
  const float ulp1 = std::ldexp(1.0f, -10);  // f16 spacing in [1, 2)
  CHECK(f32_to_f16(1.0f + ulp1 / 2) == 0x3c00);               // tie, 0x3c00 is even
  CHECK(f32_to_f16(1.0f + 3 * ulp1 / 2) == 0x3c02);           // tie, round up to even
  CHECK(f32_to_f16(next_up(1.0f + ulp1 / 2)) == 0x3c01);      // just above the tie
  CHECK(f32_to_f16(next_down(1.0f + 3 * ulp1 / 2)) == 0x3c01);  // just below the tie
  // Subnormal ties: 2^-25 is half the smallest subnormal, 3 * 2^-25 lies between 1 and 2 units.
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(f32_to_f16(next_up(std::ldexp(1.0f, -25))) == 0x0001);
  CHECK(f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);
  CHECK(f32_to_f16(-std::ldexp(3.0f, -25)) == 0x8002);
  CHECK(f32_to_f16(std::ldexp(1.0f, -30)) == 0x0000);          // underflows to zero
  CHECK(f32_to_f16(-std::ldexp(1.0f, -30)) == 0x8000);         // keeping its sign
  CHECK(f32_to_f16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  // The largest subnormal rounds up into the smallest normal.
  CHECK(f32_to_f16(next_down(std::ldexp(1.0f, -14))) == 0x0400);

  // Every midpoint between adjacent finite f16 values rounds to the even neighbour, and the f32
  // values either side of it round to the nearer one.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    float lo = f16_to_f32(static_cast<uint16_t>(h)), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    float mid = lo + (hi - lo) / 2;  // exact: 12 significant bits
    uint16_t even = static_cast<uint16_t>(h % 2 == 0 ? h : h + 1);
    INFO("h = " << h);
    REQUIRE(f32_to_f16(mid) == even);
    REQUIRE(f32_to_f16(next_down(mid)) == h);
    REQUIRE(f32_to_f16(next_up(mid)) == h + 1);
    REQUIRE(f32_to_f16(-mid) == (even | 0x8000));
  }
}

TEST_CASE("dtype: f16 overflow, infinities and NaN", "[core][dtype]") {
  CHECK(f32_to_f16(65519.0f) == 0x7bff);          // below the midpoint to 65536: stays finite
  CHECK(f32_to_f16(65520.0f) == 0x7c00);          // the tie rounds to even, which is infinity
  CHECK(f32_to_f16(1e6f) == 0x7c00);
  CHECK(f32_to_f16(-1e6f) == 0xfc00);
  CHECK(f32_to_f16(std::numeric_limits<float>::max()) == 0x7c00);
  CHECK(f32_to_f16(kInf) == 0x7c00);
  CHECK(f32_to_f16(-kInf) == 0xfc00);
  CHECK(f16_to_f32(0x7c00) == kInf);
  CHECK(f16_to_f32(0xfc00) == -kInf);
  CHECK(f16_is_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(f16_is_nan(f32_to_f16(-std::numeric_limits<float>::quiet_NaN())));
  CHECK((f32_to_f16(-std::numeric_limits<float>::quiet_NaN()) & 0x8000) != 0);
  CHECK(f16_is_nan(f32_to_f16(bits_f32(0x7f800001u))));  // signalling NaN with a low payload bit
  CHECK(std::isnan(f16_to_f32(0x7e00)));
  CHECK(std::isnan(f16_to_f32(0x7c01)));
}

TEST_CASE("dtype: every f16 round trips through f32", "[core][dtype]") {
  int nans = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t x = static_cast<uint16_t>(h);
    float f = f16_to_f32(x);
    if (f16_is_nan(x)) {
      ++nans;
      REQUIRE(std::isnan(f));
      REQUIRE(f16_is_nan(f32_to_f16(f)));
      continue;
    }
    INFO("h = " << h);
    REQUIRE(f32_to_f16(f) == x);
  }
  CHECK(nans == 2 * 1023);
}

TEST_CASE("dtype: bf16 conversions", "[core][dtype]") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(f32_to_bf16(-2.0f) == 0xc000);
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0x4049) == 3.140625f);
  CHECK(f32_to_bf16(bits_f32(0x3f808000u)) == 0x3f80);  // tie, even stays
  CHECK(f32_to_bf16(bits_f32(0x3f818000u)) == 0x3f82);  // tie, rounds up to even
  CHECK(f32_to_bf16(bits_f32(0x3f808001u)) == 0x3f81);  // above the tie
  CHECK(f32_to_bf16(bits_f32(0x3f807fffu)) == 0x3f80);  // below the tie
  CHECK(f32_to_bf16(kInf) == 0x7f80);
  CHECK(f32_to_bf16(-kInf) == 0xff80);
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up past the top
  CHECK(f32_to_bf16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(bf16_is_nan(f32_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(bf16_is_nan(f32_to_bf16(bits_f32(0x7f800001u))));  // payload only in the dropped bits
  CHECK(bf16_is_nan(f32_to_bf16(bits_f32(0xffffffffu))));

  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t x = static_cast<uint16_t>(h);
    float f = bf16_to_f32(x);
    INFO("h = " << h);
    if (bf16_is_nan(x)) {
      REQUIRE(std::isnan(f));
      REQUIRE(bf16_is_nan(f32_to_bf16(f)));
    } else {
      REQUIRE(f32_to_bf16(f) == x);
    }
  }
}

}  // namespace troupe
