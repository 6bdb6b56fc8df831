// How a job's parameters are split over its parameter-server shards.
//
// The flat parameter buffer (ParameterSpace::size() floats, blocks back to back in declaration
// order) is cut into N contiguous float ranges of near-equal size: shard i holds
// [floor(n * i / N), floor(n * (i + 1) / N)), so sizes differ by at most one float. Blocks may be
// split between shards: whole-block assignment would not balance (the MLP's first matrix is 85% of
// the model). Every process computes the same partition from (n, N), so nothing is exchanged.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/api/trainer.h"

namespace troupe::ps {

// Floats [begin, end) of the flat parameter buffer.
struct ShardRange {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
  bool operator==(const ShardRange& o) const { return begin == o.begin && end == o.end; }
};

// The ranges of `shards` shards over `floats` parameters, in shard order, covering [0, floats)
// without gaps. invalid_argument when shards < 1 or shards > floats (a shard would be empty).
Expected<std::vector<ShardRange>> partition_parameters(size_t floats, int shards);

// "w1[1200:200704] b1 w2[0:100]": the blocks (or parts of blocks, in elements) a range holds, for logs.
std::string describe_range(const ParameterSpace& space, const ShardRange& range);

}  // namespace troupe::ps
