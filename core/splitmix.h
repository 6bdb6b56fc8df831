// splitmix64: one 64-bit value spread over the whole space, so nearby inputs (seeds, epochs,
// examples) give unrelated outputs. What troupe derives its seeds and shuffles with — the same
// numbers on every node and with any standard library. Header-only: installed with the trainer API
// for the torch adapter's sources (models/torch/batch_randomness.cc).
#pragma once

#include <cstdint>

namespace troupe {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace troupe
