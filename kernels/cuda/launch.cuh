// Helpers shared by the .cu files of kernels/cuda: grid sizing for grid-stride loops and the
// argument checks every launcher makes before enqueuing work. Internal to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>
#include <string>

#include "core/status.h"
#include "kernels/cuda/check.h"

namespace troupe::kernels::cuda::detail {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times; grid-stride loops cover the rest.
constexpr size_t kMaxBlocks = 8192;

inline unsigned blocks_for(size_t n, int threads = kThreads) {
  size_t b = (n + threads - 1) / threads;
  if (b == 0) b = 1;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

// invalid_argument when n > 0 and any pointer is null.
inline Status check_pointers(const char* op, size_t n, std::initializer_list<const void*> ptrs) {
  if (n == 0) return {};
  int i = 0;
  for (const void* p : ptrs) {
    if (p == nullptr) {
      return invalid_argument(std::string("cuda::") + op + ": pointer argument " + std::to_string(i) +
                              " is null with " + std::to_string(n) + " elements to process");
    }
    ++i;
  }
  return {};
}

// invalid_argument when rows or cols is negative.
inline Status check_matrix(const char* op, int rows, int cols) {
  if (rows < 0 || cols < 0) {
    return invalid_argument(std::string("cuda::") + op + ": negative shape [" + std::to_string(rows) + " x " +
                            std::to_string(cols) + "]");
  }
  return {};
}

}  // namespace troupe::kernels::cuda::detail
