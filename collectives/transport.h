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
#include <string>

#include "core/status.h"

namespace troupe::collectives {

using Clock = std::chrono::steady_clock;

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
};

}  // namespace troupe::collectives
