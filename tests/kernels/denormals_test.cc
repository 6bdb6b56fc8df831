// Flush-to-zero in the training loop (kernels/cpu/denormals.h).
#include <catch2/catch.hpp>

#include <cfloat>

#include "kernels/cpu/denormals.h"
#include "kernels/cpu/ops.h"

using troupe::kernels::cpu::ScopedFlushDenormals;

namespace {
// FLT_MIN / 4 is a denormal; scaling through a kernel keeps the compiler from folding it.
float scaled_denormal() {
  float x = FLT_MIN;
  troupe::kernels::cpu::scale(&x, 1, 0.25f);
  return x;
}
}  // namespace

TEST_CASE("denormal results are flushed to zero inside the scope and not outside", "[kernels][denormals]") {
  CHECK(scaled_denormal() == FLT_MIN / 4);  // IEEE default: gradual underflow
  {
    ScopedFlushDenormals ftz;
    CHECK(scaled_denormal() == 0.0f);
    float x = 3.0f;  // normal numbers are untouched
    troupe::kernels::cpu::scale(&x, 1, 0.25f);
    CHECK(x == 0.75f);
  }
  CHECK(scaled_denormal() == FLT_MIN / 4);  // the previous mode is restored
}
