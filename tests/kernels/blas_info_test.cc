// The choice of OpenBLAS kernels made at start (kernels/cpu/blas_info.h).
#include <catch2/catch.hpp>

#include "kernels/cpu/blas_info.h"

using troupe::kernels::cpu::blas_corename;
using troupe::kernels::cpu::choose_blas_coretype;

TEST_CASE("a user's OPENBLAS_CORETYPE is never overridden", "[kernels][blas]") {
  CHECK(choose_blas_coretype("Haswell", "Haswell", true, true) == "");
  CHECK(choose_blas_coretype("Prescott", "Prescott", true, true) == "");
}

TEST_CASE("AVX-512 kernels replace older ones on an AVX-512 CPU", "[kernels][blas]") {
  // An H100 host's Emerald Rapids, unknown to OpenBLAS 0.3.21, gets the SSE3 Prescott kernels.
  CHECK(choose_blas_coretype("", "Prescott", true, true) == "SkylakeX");
  CHECK(choose_blas_coretype("", "Haswell", true, true) == "SkylakeX");
  CHECK(choose_blas_coretype("", "Zen", true, true) == "SkylakeX");
  // Kernels that already use AVX-512 stay.
  CHECK(choose_blas_coretype("", "SkylakeX", true, true) == "");
  CHECK(choose_blas_coretype("", "Cooperlake", true, true) == "");
  CHECK(choose_blas_coretype("", "SapphireRapids", true, true) == "");
}

TEST_CASE("AVX2 kernels replace pre-AVX2 ones on an AVX2 CPU, and nothing else changes", "[kernels][blas]") {
  CHECK(choose_blas_coretype("", "Prescott", false, true) == "Haswell");
  CHECK(choose_blas_coretype("", "Sandybridge", false, true) == "Haswell");
  CHECK(choose_blas_coretype("", "Haswell", false, true) == "");
  CHECK(choose_blas_coretype("", "Zen", false, true) == "");
  CHECK(choose_blas_coretype("", "Prescott", false, false) == "");  // an old CPU keeps old kernels
}

TEST_CASE("the kernel set in use can be named", "[kernels][blas]") {
  CHECK(!blas_corename().empty());
  CHECK(blas_corename() != "unknown");
}
