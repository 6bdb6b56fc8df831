// A worker's view of its job's parameter servers: pull the whole flat parameter vector for a
// clock, push a gradient computed from it, say it finished. The seam between the worker loop
// (async_worker.h) and where the shards live:
//
//   connect_ps()       real TCP, one connection per shard (ps_server.h; protocol in ps_wire.h).
//                      A pull or push sends its request to every shard first and reads the replies
//                      after, so the shards work in parallel.
//   local_ps_client()  shards in this process, called directly (tests, single-process jobs).
//
// Reconnection (async, a parameter server restarted by the job's supervisor): with
// PsClientOptions::resolve, a shard whose connection fails (refused, reset, closed, silent past
// the timeout) is dialled again at the address resolve gives, with backoff, until
// reconnect_timeout; the worker says its clock in the hello (the restored shard takes it), a
// worker that already finished says so again, and the failed request is sent again to that shard
// only. Without resolve, or past the deadline, the failure is final and names the shard.
//
// Replays (async, exactly-once across a restored server): the client keeps the clock and data tag
// of its recent pushes, back to the job's checkpoint before the newest complete one (with
// PsClientOptions::checkpoint_versions; a checkpoint of version C is complete once every shard
// answered a version >= C). A shard that comes back with its rank's last applied push older than
// the last it acknowledged (restored from a checkpoint) gets every push after that one again, in
// clock order, before the failed request is sent again: each gradient recomputed by the replay
// function (set_replay: the worker's trainer on the rows the tag names and on its current
// parameters, with that shard's slice as the shard holds it just before the replay: read back
// before each one, so the replays retrace a training run from the checkpoint instead of applying
// every lost step's gradient from one stale point — 60-180 of those cost 1-3 points of accuracy)
// and sent to that shard only (ParameterShard::replay). A shard that reappears having applied the
// request in flight (the connection broke, not the server) is not sent it again. When the pushes
// to replay are no longer kept, or no replay function is set, the client says so in the log and
// goes on: that shard's data accounting then shows what is missing.
//
// Versions: a pull returns each shard's version; the push of the gradient computed from that pull
// passes them back, so each shard can record the update's staleness (parameter_shard.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tls/tls_context.h"
#include "core/status.h"
#include "trainers/ps/applied_data.h"
#include "trainers/ps/parameter_shard.h"
#include "trainers/ps/staleness.h"

namespace troupe::ps {

using Versions = std::vector<int64_t>;  // one per shard, in shard order

class PsClient {
 public:
  virtual ~PsClient() = default;
  virtual size_t parameters() const = 0;  // floats in the flat vector (all shards)
  virtual int shards() const = 0;
  virtual PsMode mode() const = 0;
  // The parameters for `clock` into params[0, parameters()), after the shards' waits.
  virtual Expected<Versions> pull(int64_t clock, float* params) = 0;
  // The parameters once every worker finished (see ParameterShard::pull_final).
  virtual Expected<Versions> pull_final(float* params) = 0;
  // grads[0, parameters()) for `clock`, computed from the parameters of `pulled` on the batch
  // `tag` says (each shard records it: applied_data.h).
  virtual Status push(int64_t clock, const float* grads, const Versions& pulled, const DataTag& tag = {}) = 0;
  // The same, to the shards listed only: a replacement worker pushing again the last push of its
  // predecessor to the shards it never reached (trainers/job/ps_catch_up.h).
  virtual Status push_to(const std::vector<int>& shards, int64_t clock, const float* grads, const Versions& pulled,
                         const DataTag& tag) = 0;
  // Per shard, this rank's clock and last applied push's tag when this client connected: where a
  // replacement's predecessor stopped on each shard.
  virtual std::vector<WorkerPosition> positions() const = 0;
  // This worker trained its last step: the shards stop waiting for it.
  virtual Status finish() = 0;
  // The staleness of every update the shards applied so far, merged over shards.
  virtual Expected<StalenessHistogram> staleness() = 0;
  // The clock the shards had for this rank when it connected: 0 for a new worker; for a worker that
  // replaces a failed one of the same rank (async), the pushes its predecessor made (the highest
  // over shards), where its clock goes on.
  virtual int64_t start_clock() const { return 0; }
  // How to recompute a push for a replay (see above): the gradient of the batch `tag` names into
  // grads[0, parameters()) (zeroed), on the worker's parameters with `fresh` written over them
  // first. fresh: the restored shard's parameters as they stand before this replay (each replay
  // applied moves them), floats [fresh.range.begin, fresh.range.end) of the flat vector; its
  // values are null when there is nothing to write. An empty function: no replays. Clients
  // without reconnection ignore it.
  struct Fresh {
    ShardRange range;
    const float* values = nullptr;
  };
  using ReplayFn = std::function<Status(const DataTag& tag, const Fresh& fresh, float* grads)>;
  virtual void set_replay(ReplayFn replay) { (void)replay; }
  // Pushes replayed to restored shards so far.
  virtual int64_t replayed() const { return 0; }

  // A replacement whose predecessor died together with a shard (one node held both): the pushes of
  // this rank shard `shard` applied after `clock` (push_history.h), and one of them replayed to a
  // shard that came back restored without it (`clock` between its last applied push of the rank and
  // the rank's clock there: ParameterShard::replay). Errors name the shard; a client that cannot
  // says unavailable.
  virtual Expected<PushesAfter> pushes_after(int shard, int64_t clock) {
    (void)shard, (void)clock;
    return unavailable("this parameter-server client keeps no push history");
  }
  virtual Status replay_on(int shard, int64_t clock, const float* grads, const DataTag& tag) {
    (void)shard, (void)clock, (void)grads, (void)tag;
    return unavailable("this parameter-server client cannot replay");
  }
};

struct PsClientOptions {
  std::string job;  // the job id the servers were started with
  // Set: the connections to the servers are TLS, a certificate of the cluster's CA required.
  std::shared_ptr<const tls::TlsContext> tls = nullptr;
  int rank = 0;     // this worker
  // This worker's attempt (the job's restart count when it was placed): a server still holding a
  // connection of the rank from an earlier attempt (a predecessor cut off with its host) closes
  // that one and admits this worker; a worker of an earlier attempt than the holder's is refused.
  int64_t attempt = 0;
  std::chrono::milliseconds connect_timeout{10000};  // dialling (refusals are retried until then) and hello
  // Any reply, a pull's wait included: keep it above the shards' wait_timeout, so their error
  // (naming the slow worker) arrives rather than a bare timeout.
  std::chrono::milliseconds timeout{60000};
  // Where shard i is now (the job layer reads its GCS); empty: no reconnection.
  std::function<Expected<std::string>(int shard)> resolve;
  std::chrono::milliseconds reconnect_timeout{120000};  // how long a shard may stay unreachable
  // Set when the worker is stopped (its job failed or was cancelled): a wait for a shard to come
  // back ends at once, unavailable. Null: never.
  const std::atomic<bool>* cancel = nullptr;
  // The job's checkpoint interval in shard versions (async: every K steps x workers); 0: the job
  // takes no checkpoints, so no shard is ever restored and no push is kept for a replay.
  int64_t checkpoint_versions = 0;
};

// Connects to every shard of a job, `addresses` in shard order, and checks that they are one
// job's shards of one partition. With options.resolve, a shard that cannot be reached (its server
// died and the supervisor is restoring it: a replacement worker placed beside a replacement
// server) is dialled again where resolve says, with backoff, until reconnect_timeout or cancel.
// Errors name the shard and address: unavailable (refused, closed),
// timeout, invalid_argument (refused by the server: another job, a rank out of range, connected
// already by this attempt or by a later one; shards of different partitions), corrupt_data (not a
// parameter server).
Expected<std::unique_ptr<PsClient>> connect_ps(const std::vector<std::string>& addresses,
                                               const PsClientOptions& options);

// Worker `rank` of shards in this process (shards[i] holds the i-th range; they must outlive it).
std::unique_ptr<PsClient> local_ps_client(std::vector<ParameterShard*> shards, int rank);

}  // namespace troupe::ps
