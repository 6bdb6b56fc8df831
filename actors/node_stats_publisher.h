// Publishes this process's resource use (gcs/node_stats.h: CPU time, resident memory, descriptors,
// sockets, threads) under its node id every `period`, on a thread of its own: a GCS that is away
// delays only these writes, never the node's heartbeats. A failed write is logged once per outage.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "gcs/store.h"

namespace troupe::actors {

class NodeStatsPublisher {
 public:
  NodeStatsPublisher() = default;
  ~NodeStatsPublisher() { stop(); }
  NodeStatsPublisher(const NodeStatsPublisher&) = delete;
  NodeStatsPublisher& operator=(const NodeStatsPublisher&) = delete;

  // Publishes at once, then every `period`, until stop(). `store` must outlive the publisher.
  void start(gcs::Store* store, const std::string& node_hex, std::chrono::milliseconds period);
  void stop();

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace troupe::actors
