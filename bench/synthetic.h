// What several benchmarks share: synthetic Fashion-MNIST-shaped data, random byte windows for the
// gpt, and how far two parameter vectors are apart.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "data/readers/fashion_mnist.h"

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

// `windows` windows of `seq` random byte tokens (data/token_windows.h's layout: inputs the ids
// as f32, targets the next ids).
inline Dataset byte_windows(int64_t windows, int64_t seq, uint64_t seed) {
  Dataset d;
  d.count = windows;
  d.rows = 1;
  d.cols = static_cast<int>(seq);
  d.classes = 256;
  d.target_width = seq;
  d.schema = {FieldSpec{"tokens", ValueType::f32, ValueType::u8, {seq}, false},
              FieldSpec{"targets", ValueType::i32, ValueType::u8, {seq}, true}};
  std::mt19937_64 rng(seed);
  std::vector<int> ids(static_cast<size_t>(windows * seq + 1));
  for (int& id : ids) id = static_cast<int>(rng() % 256);
  for (int64_t t = 0; t < windows * seq; ++t) {
    d.images.push_back(static_cast<float>(ids[static_cast<size_t>(t)]));
    d.labels.push_back(ids[static_cast<size_t>(t + 1)]);
  }
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
