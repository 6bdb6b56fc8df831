// Which OpenBLAS kernel set this process runs, and a better one when OpenBLAS settled for less.
//
// OpenBLAS (DYNAMIC_ARCH) picks its kernels when the library loads, for the CPU it recognises,
// unless the environment variable OPENBLAS_CORETYPE names a set. Debian's 0.3.21 does not recognise
// newer Xeons (an H100 host's Emerald Rapids, family 6 model 207) and falls back to SSE3 "Prescott"
// kernels, which run the MLP's matmuls at ~10% of the core's peak. Since the choice is made at load
// time, a program fixes it by setting OPENBLAS_CORETYPE and executing itself again, once, before it
// does anything else: reexec_for_blas() does that, and troupe's mains call it first.
#pragma once

#include <string>

namespace troupe::kernels::cpu {

// The kernel set OpenBLAS chose in this process ("Prescott", "Haswell", "SkylakeX", "Cooperlake", ...).
std::string blas_corename();

// The decision, as a pure function: the OPENBLAS_CORETYPE to run with, or "" to keep what OpenBLAS
// chose. Never overrides a user's OPENBLAS_CORETYPE (`user_coretype` non-empty). With AVX-512
// (F, BW, DQ, VL) and kernels that do not use it, picks SkylakeX; with AVX2 + FMA and kernels older
// than Haswell, picks Haswell.
std::string choose_blas_coretype(const std::string& user_coretype, const std::string& corename, bool avx512,
                                 bool avx2_fma);

// For main() only, before any other work: when choose_blas_coretype() asks for other kernels,
// sets OPENBLAS_CORETYPE and executes /proc/self/exe with the same arguments. Returns (doing
// nothing) when no change is needed, when TROUPE_BLAS_AUTOTUNE=0, or when the exec fails.
void reexec_for_blas(char** argv);

}  // namespace troupe::kernels::cpu
