// A small synthetic dataset for trainer tests: noisy class centres, fast and deterministic.
#pragma once

#include <random>
#include <vector>

#include "data/readers/fashion_mnist.h"

namespace troupe {

// `count` examples of `classes` noisy class centres in `features` dimensions.
inline Dataset blobs(int count, int classes, int side, uint64_t seed) {
  Dataset d;
  d.count = count;
  d.rows = d.cols = side;
  d.classes = classes;
  const int f = side * side;
  std::mt19937_64 centres_rng(99), rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> centres(static_cast<size_t>(classes) * f);
  for (float& c : centres) c = unit(centres_rng);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (int i = 0; i < count; ++i) {
    d.labels.push_back(i % classes);
    for (int j = 0; j < f; ++j) d.images.push_back(centres[static_cast<size_t>(i % classes) * f + j] + noise(rng));
  }
  return d;
}

// y = x A + b: 4 inputs, 2 values per example (a regression, --loss mse).
inline Dataset linear_values(int count, uint64_t seed) {
  Dataset d;
  d.count = count;
  d.rows = 1;
  d.cols = 4;
  d.classes = 0;
  d.target_width = 2;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  const float a[4][2] = {{0.5f, -1.0f}, {1.5f, 0.25f}, {-0.75f, 0.5f}, {0.1f, 2.0f}};
  for (int i = 0; i < count; ++i) {
    float x[4];
    for (float& v : x) d.images.push_back(v = unit(rng));
    for (int k = 0; k < 2; ++k) d.targets.push_back(x[0] * a[0][k] + x[1] * a[1][k] + x[2] * a[2][k] + x[3] * a[3][k]);
  }
  return d;
}

}  // namespace troupe
