// TROUPE_HD marks small inline functions that compile for the host and, under nvcc, for the device
// too, so a CPU reference and a CUDA kernel share one definition (core/dtype.h's conversions,
// core/loss_scale.h's rule).
#pragma once

#if defined(__CUDACC__)
#define TROUPE_HD __host__ __device__ __forceinline__
#else
#define TROUPE_HD inline
#endif
