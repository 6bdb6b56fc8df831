// Test helpers: run one function per rank on threads over an in-process group, and the inputs and
// references the collective tests compare with.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/inproc_transport.h"
#include "core/dtype.h"

namespace troupe::collectives::testing {

using RankFn = std::function<Status(Communicator&)>;

// Runs fn(communicator of rank r) on one thread per rank; returns each rank's Status.
inline std::vector<Status> run_ranks(std::vector<std::unique_ptr<Transport>> transports, const RankFn& fn) {
  const size_t n = transports.size();
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Communicator comm(std::move(transports[r]));
      status[r] = fn(comm);
    });
  for (auto& t : threads) t.join();
  return status;
}

inline std::vector<Status> run_inproc(int size, const RankFn& fn) { return run_ranks(make_inproc_group(size), fn); }

// Multiples of 1/4 in [-1.25, 1.25]: sums of up to 8 of them are exact in f16 and bf16 (at most 6
// significant bits), so sums must match the reference exactly whatever the order of accumulation.
inline float input_value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3) % 11) - 5) * 0.25f;
}

inline std::vector<char> to_bytes(const std::vector<float>& v, DType dtype) {
  std::vector<char> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t h = dtype == DType::f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

inline std::vector<float> to_floats(const std::vector<char>& b, DType dtype) {
  std::vector<float> out(b.size() / dtype_size(dtype));
  for (size_t i = 0; i < out.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&out[i], b.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      out[i] = dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

// Value after a round trip through `dtype` storage.
inline float stored(float x, DType dtype) {
  if (dtype == DType::f16) return f16_to_f32(f32_to_f16(x));
  if (dtype == DType::bf16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

}  // namespace troupe::collectives::testing
