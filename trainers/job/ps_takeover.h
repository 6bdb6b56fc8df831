// How a replacement async worker takes over from its failed predecessor of the same rank, so that
// every example's gradient is applied exactly once on every parameter server (applied_data.h):
//
//   1. Every server said, in its welcome, the rank's clock and the data tag of its last applied
//      push (PsClient::positions()).
//   2. A server one clock behind the others lacks the predecessor's last push: it died between
//      sending it to some servers and the rest. The replacement recomputes that batch's gradient
//      (the tag names its examples in the epoch's plan) from freshly pulled parameters and pushes
//      it, at that clock, to those servers only. Every server then applied every push once.
//   3. The shards the predecessor held go back to the ledger at the offset where the applied data
//      ends: a shard in the last push's tag at that push's end; any other it held at where its
//      claim started (a worker trains its shards in order, completing each before it pushes a batch
//      of the next, so it applied nothing of those). The next claim of each starts there.
//
// When every server was restored (their clocks for the rank back at 0), the rank goes on after the
// newest record of it (every server's clock moved there); the checkpoints of one version can catch
// the rank one push apart on different servers (its push was in flight to all of them), and a
// server one push behind gets that push as in step 2 (a replay). Nobody can replay more: the
// predecessor's shards completed after its last applied push are reopened in the ledger at that
// push's end (or their claim's start) and trained again (ShardLedger::reopen).
//
// A server whose record of the rank ends earlier was restored from a checkpoint meanwhile: its node
// died with the predecessor's (one node held both), and the pushes it lost died with the
// predecessor, which would have replayed them (ps_client.h). A server that applied them all keeps
// their tags (push_history.h): the replacement asks it for them, recomputes each gradient from
// freshly pulled parameters and replays them to the restored server alone, in clock order, before
// it releases any shard (so nobody trains those shards' next examples before). When that history
// no longer reaches back far enough, it is logged; the job's accounting names the examples the
// restored server lacks (gcs/async_accounting.h).
#pragma once

#include <string>

#include "core/ids.h"
#include "core/status.h"
#include "data/shards/shard_ledger.h"
#include "data/shards/shard_plan.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/ps/ps_client.h"
#include "trainers/setup/train_options.h"

namespace troupe::job {

struct TakeOver {
  int released = 0;           // shards given back to the ledger
  int resumed_mid_shard = 0;  // of them, at an offset > 0
  int caught_up = 0;          // servers the last push was pushed to again
  int replayed = 0;           // pushes replayed to servers restored without them
  int servers_replayed = 0;   // such servers
  int reopened = 0;           // shards it completed, trained again: every server lost their tails
  std::string reopened_where;
  // Every server was restored: the clock the rank goes on at (after the newest record of it on
  // any server; the servers were moved there). 0: the clients' start_clock() stands.
  int64_t start_clock = 0;
  std::string summary;        // one line for the log and the shards_moved event
};

// Steps 2 and 3 above for worker `rank` of `workers`, ledger identity `me`, training `train` with
// `options` on epochs planned by `plan`. Errors: internal (the servers at the highest clock
// disagree on the last push), the client's, trainer's and ledger's errors.
Expected<TakeOver> take_over(ps::PsClient& client, const TrainOptions& options, const Dataset& train,
                             const data::ShardPlanOptions& plan, data::ShardLedger& ledger, WorkerId me, int rank,
                             int workers);

}  // namespace troupe::job
