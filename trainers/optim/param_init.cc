#include "trainers/optim/param_init.h"

#include <random>

namespace troupe {
namespace {

// Draws every block's values in declaration order from one generator, as a whole-buffer
// initialisation does, handing each (flat index, value) to `put`; stops after the block holding
// float `last` - 1, since nothing later is wanted.
template <typename Put>
void draw(const ParameterSpace& space, uint64_t seed, size_t last, Put put) {
  std::mt19937_64 rng(seed);
  for (const ParamBlock& b : space.blocks()) {
    const size_t first = b.param.offset, n = b.param.numel;
    if (first >= last) break;
    switch (b.init.kind) {
      case Init::Kind::zeros:
      case Init::Kind::constant: {
        const float v = b.init.kind == Init::Kind::zeros ? 0.0f : b.init.a;
        for (size_t i = 0; i < n; ++i) put(first + i, v);
        break;
      }
      case Init::Kind::uniform: {
        std::uniform_real_distribution<float> dist(-b.init.a, b.init.a);
        for (size_t i = 0; i < n; ++i) put(first + i, dist(rng));
        break;
      }
      case Init::Kind::normal: {
        std::normal_distribution<float> dist(0.0f, b.init.a);
        for (size_t i = 0; i < n; ++i) put(first + i, dist(rng));
        break;
      }
      case Init::Kind::given:  // the trainer's values; nothing drawn
        for (size_t i = 0; i < n; ++i) put(first + i, b.values[i]);
        break;
    }
  }
}

}  // namespace

void init_parameter_range(const ParameterSpace& space, uint64_t seed, size_t begin, size_t end, float* out) {
  draw(space, seed, end, [&](size_t at, float v) {
    if (at >= begin && at < end) out[at - begin] = v;
  });
}

void init_parameter_ranges(const ParameterSpace& space, uint64_t seed,
                           const std::vector<std::pair<size_t, size_t>>& ranges, float* flat) {
  if (ranges.empty()) return;
  size_t r = 0;  // the first range that does not end before the float at hand
  draw(space, seed, ranges.back().second, [&](size_t at, float v) {
    while (r < ranges.size() && ranges[r].second <= at) ++r;
    if (r < ranges.size() && at >= ranges[r].first) flat[at] = v;
  });
}

}  // namespace troupe
