#include "trainers/ps/ps_partition.h"

#include <algorithm>

namespace troupe::ps {

Expected<std::vector<ShardRange>> partition_parameters(size_t floats, int shards) {
  if (shards < 1)
    return invalid_argument("parameter servers: " + std::to_string(shards) + " shards; a job needs at least one");
  if (static_cast<size_t>(shards) > floats)
    return invalid_argument("parameter servers: " + std::to_string(shards) + " shards for " + std::to_string(floats) +
                            " parameters would leave a shard empty; use at most " + std::to_string(floats));
  std::vector<ShardRange> ranges(static_cast<size_t>(shards));
  const size_t n = static_cast<size_t>(shards);
  for (size_t i = 0; i < n; ++i) ranges[i] = ShardRange{floats * i / n, floats * (i + 1) / n};
  return ranges;
}

std::string describe_range(const ParameterSpace& space, const ShardRange& range) {
  std::string text;
  for (const ParamBlock& b : space.blocks()) {
    const size_t first = std::max(range.begin, b.param.offset), last = std::min(range.end, b.param.offset + b.param.numel);
    if (first >= last) continue;
    text += (text.empty() ? "" : " ") + b.name;
    if (last - first != b.param.numel)
      text += "[" + std::to_string(first - b.param.offset) + ":" + std::to_string(last - b.param.offset) + "]";
  }
  return text;
}

}  // namespace troupe::ps
