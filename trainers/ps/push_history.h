// Per worker rank, the clock and data tag of the pushes a parameter shard applied last: what a
// replacement worker asks a surviving shard for when its predecessor died together with another
// shard (a node that held both). The restored shard lost the predecessor's pushes after its
// checkpoint, and only the predecessor kept them for replays (ps_client.h); the surviving shards
// applied the same pushes, in clock order, so their history names them again
// (trainers/job/ps_takeover.h recomputes and replays them).
//
// Bounded: `keep` pushes per rank (the job's checkpoint interval, twice over, and some; 0 keeps
// none). A question about pushes older than those kept answers `complete = false`.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "data/feed/batch_feed.h"

namespace troupe::ps {

struct TaggedPush {
  int64_t clock = 0;
  DataTag tag;
};

struct PushesAfter {
  std::vector<TaggedPush> pushes;  // in clock order
  bool complete = false;           // every push of the rank after the clock asked about is here
};

class PushHistory {
 public:
  explicit PushHistory(int workers, size_t keep = 0) : ranks_(static_cast<size_t>(workers)), keep_(keep) {}
  void set_keep(size_t keep) { keep_ = keep; }

  // Worker `worker`'s push of `clock` was applied (a replay of an older clock goes in its place).
  void add(int worker, int64_t clock, const DataTag& tag);
  // Worker `worker`'s applied pushes of clocks > `after`; complete unless older ones were dropped
  // (or the rank is out of range).
  PushesAfter after(int worker, int64_t after) const;
  // A restored shard knows nothing of the rank's pushes up to `clock` (its checkpoint's record ends
  // there): a question about them is answered incomplete.
  void known_from(int worker, int64_t clock);

 private:
  struct Rank {
    std::deque<TaggedPush> pushes;
    int64_t dropped_up_to = -1;  // the newest clock dropped from the front
  };
  std::vector<Rank> ranks_;
  size_t keep_;
};

}  // namespace troupe::ps
