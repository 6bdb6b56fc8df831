// Runtime dispatch for hot CPU loops: GCC builds one clone per instruction set and picks the best
// at load time, so one binary is fast on AVX-512 hosts and still runs on older ones.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define TROUPE_VECTORIZE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TROUPE_VECTORIZE
#endif
