// Main of troupe_gpu_tests. With no CUDA device visible it says so loudly and exits 77, the code
// CTest's SKIP_RETURN_CODE turns into "skipped"; otherwise it runs the Catch2 session. Run as
// `troupe_gpu_tests --device-rank ...` it is one rank of a multi-process test (device_rank.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "core/device.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cuda/runtime.h"
#include "tests/gpu/device_rank.h"

int main(int argc, char** argv) {
  troupe::kernels::cpu::reexec_for_blas(argv);  // the CPU references' kernels, as troupe's mains pick them
  if (troupe::test::is_device_rank(argc, argv)) return troupe::test::device_rank_main(argc, argv);
  std::string why;
  if (troupe::cuda_device_count(&why) == 0) {
    std::fprintf(stderr, "SKIPPED: troupe_gpu_tests: no CUDA device visible (%s)\n", why.c_str());
    std::fflush(stderr);
    return 77;
  }
  std::fprintf(stderr, "troupe_gpu_tests: running on cuda:0 (%s)\n", troupe::kernels::cuda::device_name(0).c_str());
  return Catch::Session().run(argc, argv);
}
