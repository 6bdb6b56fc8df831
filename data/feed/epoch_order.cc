#include "data/feed/epoch_order.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace troupe {

std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int epoch) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

int64_t epoch_steps(int64_t examples, int64_t batch, bool pad) {
  if (batch <= 0) return 0;
  return pad ? (examples + batch - 1) / batch : examples / batch;
}

int64_t step_examples(int64_t examples, int64_t batch, bool pad, int64_t step) {
  const int64_t left = examples - step * batch;
  return pad ? std::max<int64_t>(0, std::min(batch, left)) : (left >= batch ? batch : 0);
}

}  // namespace troupe
