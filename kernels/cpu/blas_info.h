// Which OpenBLAS kernel set this process runs. OpenBLAS picks its kernels for the CPU when the
// library loads, unless the environment variable OPENBLAS_CORETYPE names a set; on these AVX-512
// hosts it picks Cooperlake kernels by itself, while OPENBLAS_CORETYPE=Haswell (set in some
// environments) limits it to AVX2 and roughly halves the MLP's matmul speed. Trainers log it and
// benchmarks print it, so a slow figure can be traced to it.
#pragma once

#include <string>

namespace troupe::kernels::cpu {

// The kernel set OpenBLAS chose in this process ("Haswell", "SkylakeX", "Cooperlake", ...).
std::string blas_corename();

}  // namespace troupe::kernels::cpu
