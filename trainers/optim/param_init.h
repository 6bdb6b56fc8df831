// How the runtime fills a trainer's declared parameter blocks from the job's seed: block by block in
// declaration order from one mt19937_64 (trainers/api/trainer.h, Init); a block declared with its
// values takes them and draws nothing. The same on every replica,
// and for the MLP the same as mlp_init.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "trainers/api/trainer.h"

namespace troupe {

// Fills floats [begin, end) of the flat layout into out[0, end - begin): exactly those floats of a
// whole-buffer initialisation (every block is drawn, those outside the range are discarded), so a
// pipeline stage holding only its range starts where a single process would.
void init_parameter_range(const ParameterSpace& space, uint64_t seed, size_t begin, size_t end, float* out);

// The same for several ranges [first, second) of the flat layout at once (sorted, disjoint), each
// float written at its own index of `flat` (a buffer of the whole layout of which only the ranges
// are used: a sharded replica's chunks). One pass over the draws, however many ranges.
void init_parameter_ranges(const ParameterSpace& space, uint64_t seed,
                           const std::vector<std::pair<size_t, size_t>>& ranges, float* flat);

}  // namespace troupe
