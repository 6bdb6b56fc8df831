// Writes the lifecycle reports of a node manager (ActorStateChange) into the GCS: the actor's
// record (state, node, death reason, the GPUs it held) and an event per transition. ALIVE reports
// are skipped: the head records the actors it started as ALIVE, in one batch, with the GPUs each
// node manager's reply names (actors/head_service.h). The node manager's sink must be
// quick, so reports are queued and written by a thread of this object, in order, in batches.
//
// Until a store is attached (a node learns where the GCS is only after the head admitted it),
// reports wait in the queue. A report whose write fails is retried on the next batch, so a GCS that
// restarts loses nothing; the queue is bounded (oldest ALIVE reports dropped first, logged) so a
// long outage cannot exhaust memory.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "actors/messages.h"
#include "gcs/store.h"

namespace troupe::actors {

class ActorStateWriter {
 public:
  ActorStateWriter();
  ~ActorStateWriter();  // writes what it can within 2 s, then stops
  ActorStateWriter(const ActorStateWriter&) = delete;
  ActorStateWriter& operator=(const ActorStateWriter&) = delete;

  // The sink to give the node manager (NodeManagerOptions::on_state_change).
  void report(const ActorStateChange& change);
  // Starts writing into `store` (which must outlive this writer).
  void attach(gcs::Store* store);
  // Blocks until every queued report is written or `timeout` passes; true when the queue is empty.
  bool flush(std::chrono::milliseconds timeout);

 private:
  void run();
  Status write(const ActorStateChange& change);

  std::mutex mu_;
  std::condition_variable cv_, drained_;
  std::deque<ActorStateChange> queue_;
  gcs::Store* store_ = nullptr;
  bool stop_ = false;
  bool writing_ = false;
  std::thread thread_;
};

}  // namespace troupe::actors
