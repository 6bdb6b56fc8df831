// One thread that runs a replica's collectives in the order they were queued, so communication
// overlaps the caller's compute (prefetched parameter gathers, gradient reduce-scatters) while every
// rank still issues the same collectives in the same order: the order of submit() calls, which the
// caller makes deterministic. Each task's own collective deadline bounds its run; wait() returns
// its status. abort() drops the tasks not yet begun (after a failure nothing more should go out).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "core/status.h"

namespace troupe {

class CommQueue {
 public:
  CommQueue();
  ~CommQueue();  // aborts what has not begun, waits for the task running
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  using Ticket = int64_t;
  Ticket submit(std::function<Status()> task);
  // The task's status once it has run (internal_error for a ticket never submitted or already
  // waited for; unavailable for one dropped by abort()).
  Status wait(Ticket ticket);
  // Waits for every task submitted; the first error among those not waited for yet.
  Status drain();
  void abort();
  double busy_seconds() const;  // time spent running tasks

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable work_, done_;
  std::deque<std::pair<Ticket, std::function<Status()>>> queue_;
  std::map<Ticket, Status> finished_;
  Ticket next_ = 0;
  int64_t pending_ = 0;  // submitted and not finished
  bool stop_ = false;
  double busy_ = 0;
  std::thread thread_;  // last
};

}  // namespace troupe
