// The seam under every collective algorithm: one rank's connections to the other ranks of a group.
// Algorithms (collectives/allreduce_*.cc, ...) see only this interface; transports implement it:
// in-process (threads of one process, for tests), TCP (ranks anywhere), shared memory (ranks of one
// host), NCCL/staged device paths (GPU buffers). Tensor bytes travel here, never in CAF messages.
//
// Every call takes a deadline and returns by it: `timeout` naming the peer rank when the peer did
// not send or receive in time, `unavailable` naming the peer rank when its connection closed (the
// process died). A transport that failed stays failed: later calls return the same error at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace troupe::collectives {

using Clock = std::chrono::steady_clock;

enum class CollectiveKind : uint8_t { allreduce = 1, broadcast, allgather, reduce_scatter, barrier, shift };
const char* collective_name(CollectiveKind kind);

// What every rank of one collective call must agree on. The Communicator hands it to the transport
// before the call (begin_call); transports that frame their messages stamp it on each one and check
// it on receipt, so a rank that called something else (another count, dtype, op, root, or an older
// sequence number) is named in a clear error instead of corrupting buffers or hanging.
struct CallDescriptor {
  uint64_t sequence = 0;  // 1, 2, ... per Communicator
  CollectiveKind kind = CollectiveKind::barrier;
  DType dtype = DType::f32;
  uint8_t reduce = 0;     // ReduceOp for allreduce / reduce_scatter, else 0
  DType wire = DType::f32;
  int32_t root = -1;      // broadcast only (shift: the distance)
  uint64_t count = 0;     // elements per rank as the caller passed them

  // "allreduce #5 of 1000 f32 (sum)"
  std::string describe() const;
  bool operator==(const CallDescriptor& o) const {
    return sequence == o.sequence && kind == o.kind && dtype == o.dtype && reduce == o.reduce && wire == o.wire &&
           root == o.root && count == o.count;
  }
  bool operator!=(const CallDescriptor& o) const { return !(*this == o); }
};

class NativeCollectives;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `bytes` to rank `to`; returns once they are handed to the transport (may be buffered).
  virtual Status send(int to, const void* data, size_t bytes, Clock::time_point deadline) = 0;
  // Receives exactly `bytes` from rank `from`.
  virtual Status recv(int from, void* data, size_t bytes, Clock::time_point deadline) = 0;
  // Sends to `to` and receives from `from` at the same time (the step of a ring or a butterfly):
  // never deadlocks when both peers send large buffers to each other.
  virtual Status send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data,
                           size_t recv_bytes, Clock::time_point deadline) = 0;

  // "tcp", "inproc", "shm", ...
  virtual std::string kind() const = 0;

  // Called by the Communicator before every collective with what all ranks must agree on.
  virtual void begin_call(const CallDescriptor& call) { (void)call; }
  // Called by the Communicator when this rank's call failed with `error` (a peer died, timed out,
  // or disagreed): tells the other ranks, best effort and without blocking past a short bound, so
  // their calls return an error naming the rank at fault instead of waiting for their deadline.
  virtual void abort(const Status& error) { (void)error; }
  // Thread-safe, from any thread: makes this rank's call in progress, and every later one, return
  // `why` within ~10 ms instead of running to its deadline — how a stopped actor leaves a
  // collective whose peer is gone. The call then aborts as on any failure, so the other ranks hear
  // of it. Default: nothing (the call runs to its deadline).
  virtual void interrupt(const Status& why) { (void)why; }
  // Collectives this transport runs itself (shared memory, NCCL) instead of the algorithms over
  // send/recv; nullptr when it has none.
  virtual NativeCollectives* native() { return nullptr; }
};

}  // namespace troupe::collectives
