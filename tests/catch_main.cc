// The one Catch2 (v2) main shared by every unit-test executable. Like troupe's own mains, it first
// lets OpenBLAS run the kernels the CPU has (kernels/cpu/blas_info.h: on a CPU Debian's OpenBLAS
// does not recognise it re-executes itself once with OPENBLAS_CORETYPE set; TROUPE_BLAS_AUTOTUNE=0
// or a user's OPENBLAS_CORETYPE keeps what there is), so the tests exercise the kernels users run.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "kernels/cpu/blas_info.h"

int main(int argc, char** argv) {
  troupe::kernels::cpu::reexec_for_blas(argv);
  return Catch::Session().run(argc, argv);
}
