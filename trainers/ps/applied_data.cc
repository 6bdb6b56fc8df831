#include "trainers/ps/applied_data.h"

#include <algorithm>

namespace troupe::ps {

std::string AppliedData::record(int worker, const DataTag& tag) {
  if (tag.empty()) return {};
  std::string problems;
  for (const DataSpan& d : tag) {
    AppliedShard& s = shards_[{d.epoch, d.shard}];
    s.epoch = d.epoch;
    s.shard = d.shard;
    const int64_t end = d.offset + d.rows;
    const std::string which = "epoch " + std::to_string(d.epoch) + " shard " + std::to_string(d.shard) + " [" +
                              std::to_string(d.offset) + ", " + std::to_string(end) + ")";
    if (d.offset < s.next) {  // examples [offset, min(end, next)) were applied before
      const int64_t again = std::min(end, s.next) - d.offset;
      s.duplicates += again;
      problems += (problems.empty() ? "" : "; ") + which + " repeats " + std::to_string(again) +
                  " examples already applied (expected offset " + std::to_string(s.next) + ")";
    } else if (d.offset > s.next) {
      s.gaps += d.offset - s.next;
      problems += (problems.empty() ? "" : "; ") + which + " skips examples [" + std::to_string(s.next) + ", " +
                  std::to_string(d.offset) + ")";
    }
    s.applied += d.rows;
    s.next = std::max(s.next, end);
  }
  last_[static_cast<size_t>(worker)] = tag;
  return problems;
}

std::vector<AppliedShard> AppliedData::shards() const {
  std::vector<AppliedShard> out;
  out.reserve(shards_.size());
  for (const auto& [key, s] : shards_) out.push_back(s);
  return out;
}

}  // namespace troupe::ps
