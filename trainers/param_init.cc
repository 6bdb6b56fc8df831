#include "trainers/param_init.h"

#include <random>

namespace troupe {

void init_parameter_range(const ParameterSpace& space, uint64_t seed, size_t begin, size_t end, float* out) {
  std::mt19937_64 rng(seed);
  for (const ParamBlock& b : space.blocks()) {
    const size_t first = b.param.offset, n = b.param.numel;
    // Element i of the block lands at out[first + i - begin] when it is inside the range.
    auto put = [&](size_t i, float v) {
      if (first + i >= begin && first + i < end) out[first + i - begin] = v;
    };
    switch (b.init.kind) {
      case Init::Kind::zeros:
      case Init::Kind::constant: {
        const float v = b.init.kind == Init::Kind::zeros ? 0.0f : b.init.a;
        for (size_t i = 0; i < n; ++i) put(i, v);
        break;
      }
      case Init::Kind::uniform: {
        std::uniform_real_distribution<float> dist(-b.init.a, b.init.a);
        for (size_t i = 0; i < n; ++i) put(i, dist(rng));
        break;
      }
      case Init::Kind::normal: {
        std::normal_distribution<float> dist(0.0f, b.init.a);
        for (size_t i = 0; i < n; ++i) put(i, dist(rng));
        break;
      }
    }
  }
}

}  // namespace troupe
