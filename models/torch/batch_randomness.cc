#include "models/torch/batch_randomness.h"

#include <algorithm>
#include <cstring>

#include "core/splitmix.h"

namespace troupe::torch_model {

std::mutex& generator_lock() {
  static std::mutex m;
  return m;
}

uint64_t sample_key(const void* data, size_t bytes, uint64_t key) {
  constexpr size_t kWords = 1024;
  const auto* p = static_cast<const unsigned char*>(data);
  const size_t words = bytes / 8;
  const size_t stride = std::max<size_t>(1, words / kWords);
  uint64_t h = splitmix64(key ^ bytes);
  for (size_t i = 0; i < words; i += stride) {
    uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    h = splitmix64(h ^ w);
  }
  for (size_t i = words * 8; i < bytes; ++i) h = splitmix64(h ^ p[i]);  // the tail of fewer than 8
  return h;
}

uint64_t BatchRandomness::forward_seed(uint64_t key) const { return splitmix64(seed_ ^ splitmix64(key)); }

at::Tensor BatchRandomness::generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

}  // namespace troupe::torch_model
