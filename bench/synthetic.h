// What several benchmarks share: synthetic Fashion-MNIST-shaped data, and how far two parameter
// vectors are apart.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "trainers/fashion_mnist.h"

namespace troupe::bench {

// `count` random 28 x 28 images in [0, 1) with labels in [0, 10).
inline Dataset synthetic_images(int64_t count, uint64_t seed) {
  Dataset d;
  d.count = count;
  d.rows = d.cols = 28;
  d.classes = 10;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  d.images.resize(static_cast<size_t>(count) * 784);
  for (auto& p : d.images) p = pixel(rng);
  for (int64_t i = 0; i < count; ++i) d.labels.push_back(static_cast<int32_t>(rng() % 10));
  return d;
}

// ||a - b|| / ||b||.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

}  // namespace troupe::bench
