// Internal to the shared-memory transport: how a rank waits for its peers and wakes them.
//
// A waiter sleeps on a futex word (a Bell): its own bell while it waits for a mailbox, the group's
// barrier bell while it waits in a barrier. Whoever makes progress bumps the bell concerned and
// calls FUTEX_WAKE only when someone sleeps on it: a sender or receiver rings its peer's bell, the
// rank that completes a barrier rings the barrier bell once for all (earlier arrivals ring
// nothing, so sleepers are not woken only to sleep again). Abort and close ring every bell.
//
// Before sleeping a waiter spins. When every rank can have a core it polls with `pause` for
// ~50 us: a peer on another core usually answers within microseconds. When ranks outnumber the
// cores this process may run on, the peer it waits for is likely queued behind it, so it polls
// with sched_yield() instead (handing its core to that peer) for up to ~1 ms; only a longer wait
// (a slow or unbalanced step) sleeps, so idle ranks do not burn the cores. Asleep, it wakes at
// least every 10 ms to check the abort word, the deadline and whether the ranks it still waits
// for closed their transport or exited (their pid; threads of this process share our pid, so for
// them only close, abort and the deadline apply).
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

  // Wakes `rank` if it sleeps on its own bell (waiting for a mailbox this rank changed).
  void ring(int rank);
  // Wakes every rank asleep in a barrier (the rank that completes one calls it).
  void ring_barrier();
  // Rings every other rank's bell and the barrier bell (abort, close).
  void ring_all();

  // This rank's bell (mailbox waits) and the group's barrier bell.
  Bell& own_bell() { return segment_.control(rank_).bell; }
  Bell& barrier_bell() { return segment_.header().barrier_bell; }

  // Returns `ready` once ready() holds (checked before anything else, so a finished peer that
  // closed or exited afterwards is no error), else why not by `deadline`; sleeps on `bell`, which
  // whoever can make ready() true rings. `pending` fills the ranks ready() still waits for: those
  // are checked for exit and close.
  WaitOutcome wait(Bell& bell, const std::function<bool()>& ready,
                   const std::function<void(std::vector<int>&)>& pending, Clock::time_point deadline);

  // True once some rank aborted the group.
  bool aborted() const;
  // "rank 1 aborted <its error>", with its code; ok when nobody aborted.
  Status abort_status() const;
  // Records `error` as this rank's abort unless another was recorded first, and wakes everyone.
  void abort(const Status& error);

 private:
  // Polls ready() until it holds (true) or the spin budget is spent (false).
  bool spin(const std::function<bool()>& ready);

  Segment& segment_;
  int rank_;
  int32_t own_pid_;
  bool oversubscribed_;  // more ranks than cores this process may run on
};

}  // namespace troupe::collectives::shm
