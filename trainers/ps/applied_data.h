// What data a parameter shard's updates were computed from: the exactly-once record of an async
// job (gcs/async_accounting.h proves it from what every server publishes at the end).
//
// Every push carries the DataTag of the batch its gradient came from (data/feed/batch_feed.h). The
// shard keeps, under its lock:
//   - per worker rank, the tag of its last applied push: a replacement of a failed worker asks for
//     it (ps_client.h positions()) to resume the shards its predecessor held exactly where the
//     applied data ends, and to find a push its predecessor got to some shards only;
//   - per (epoch, ledger shard), the examples applied so far and the next offset expected. A span
//     must start exactly there: one that starts earlier repeats examples (counted as duplicates,
//     e.g. a shard trained again from 0 after a failure), one that starts later skips some (a gap).
// The record goes into the shard's checkpoint files (encode/decode: an opaque blob of the shard
// file, checkpoint/shard_file.h), consistent with the parameters beside it (both taken under the
// shard's lock). A shard restored from a checkpoint starts from that record; each worker then
// replays to it the pushes it made after the record's last push of its rank (ps_client.h), so the
// restored shard ends up with every example applied once, like the others.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/feed/batch_feed.h"

namespace troupe::ps {

// One (epoch, ledger shard) as one parameter shard saw it.
struct AppliedShard {
  int epoch = 0;
  int shard = 0;
  int64_t applied = 0;     // examples whose gradients were applied (duplicates included)
  int64_t next = 0;        // the offset the next span must start at
  int64_t duplicates = 0;  // examples applied again
  int64_t gaps = 0;        // examples skipped over
};

// Where a worker rank stands on one shard: its clock (pushes applied), its last applied push's
// clock (-1: none) and tag.
struct WorkerPosition {
  int64_t clock = 0;
  DataTag last;
  int64_t last_clock = -1;
};

class AppliedData {
 public:
  explicit AppliedData(int workers)
      : last_(static_cast<size_t>(workers)), last_clock_(static_cast<size_t>(workers), -1) {}
  // Worker `worker`'s push of clock `clock` tagged `tag` was applied. Returns "" or what was wrong
  // with it (a duplicate or a gap, for the log; it is counted either way). An empty tag records
  // no examples (the clock still counts as the worker's last push).
  std::string record(int worker, int64_t clock, const DataTag& tag);
  // Examples applied outside any worker's pushes (an async job resumed from another job's
  // checkpoint catching a shard up: trainers/job/ps_resume.h). Returns as record() does.
  std::string record_examples(const DataTag& tag);
  // Every worker's last push forgotten: the workers of a job resumed from another job's checkpoint
  // are new (their pushes start at clock 0); the examples applied stay.
  void forget_workers();
  const DataTag& last(int worker) const { return last_[static_cast<size_t>(worker)]; }
  int64_t last_clock(int worker) const { return last_clock_[static_cast<size_t>(worker)]; }
  std::vector<AppliedShard> shards() const;  // ordered by epoch, then shard

  // The whole record as bytes (msgpack), and back. decode: corrupt_data naming what is malformed,
  // invalid_argument for a record of another number of workers.
  std::string encode() const;
  static Expected<AppliedData> decode(const std::string& bytes, int workers);

 private:
  std::vector<DataTag> last_;
  std::vector<int64_t> last_clock_;
  std::map<std::pair<int, int>, AppliedShard> shards_;
};

}  // namespace troupe::ps
