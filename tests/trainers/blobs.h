// A small synthetic dataset for trainer tests: noisy class centres, fast and deterministic.
#pragma once

#include <random>
#include <vector>

#include "trainers/fashion_mnist.h"

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

}  // namespace troupe
