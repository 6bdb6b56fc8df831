// Internal to the shared-memory transport: how a rank waits for its peers and wakes them.
//
// Each rank has a futex word (its bell). A rank that made progress others may wait for (arrived at
// a barrier, wrote or drained a mailbox, aborted, closed) bumps the bells of the ranks concerned and
// calls FUTEX_WAKE only for those asleep. A waiter spins briefly (~50 us when every rank can have a
// core, ~2 us when ranks outnumber cores, so runnable peers get the CPU), then sleeps on its bell in
// slices of at most 10 ms. Between slices it checks the abort word, the deadline and whether the
// ranks it still waits for closed their transport or exited (their pid; threads of this process
// share our pid, so for them only close, abort and the deadline apply).
#pragma once

#include <functional>
#include <vector>

#include "collectives/shm_segment.h"

namespace troupe::collectives::shm {

// Why a wait ended.
struct WaitOutcome {
  enum Kind { ready, aborted, exited, closed, timed_out } kind = ready;
  int rank = -1;    // exited / closed: the rank at fault
  int32_t pid = 0;  // exited: its pid
  bool ok() const { return kind == ready; }
};

class Waiter {
 public:
  explicit Waiter(Segment& segment);

  // Wakes `rank` if it sleeps waiting for something this rank did.
  void ring(int rank);
  void ring_all();

  // Returns `ready` once ready() holds (checked before anything else, so a finished peer that
  // closed or exited afterwards is no error), else why not by `deadline`. `pending` fills the ranks
  // ready() still waits for: those are checked for exit and close.
  WaitOutcome wait(const std::function<bool()>& ready, const std::function<void(std::vector<int>&)>& pending,
                   Clock::time_point deadline);

  // True once some rank aborted the group.
  bool aborted() const;
  // "rank 1 aborted <its error>", with its code; ok when nobody aborted.
  Status abort_status() const;
  // Records `error` as this rank's abort unless another was recorded first, and wakes everyone.
  void abort(const Status& error);

 private:
  Segment& segment_;
  int rank_;
  int32_t own_pid_;
  long spin_ns_;
};

}  // namespace troupe::collectives::shm
