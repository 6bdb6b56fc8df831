// What an actor hosted by a node needs to know about where it runs: the node's id, the address its
// data-plane sockets should listen on, how to reach the GCS, the process's settings and the GPUs
// its node manager gave it. The node
// learns the GCS address only when the head admits it, after its node manager (and so the
// factories of its actor types) already exist; the factories hold this slot and their actors wait
// on it (bounded) for the node to fill it in.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "actors/gpu_assignment.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/status.h"
#include "gcs/redis_store.h"

namespace troupe::actors {

struct NodeEnvironment {
  NodeId node;
  std::string bind = "127.0.0.1";  // host for data-plane listeners (collectives, parameter servers)
  gcs::RedisStoreOptions gcs;
  Config config;
  // The node's GPUs and who holds which: an actor finds its own devices by its id (devices_of).
  // Null where the process hosts no node manager with GPUs.
  std::shared_ptr<const GpuAssignments> gpus;
};

class NodeEnvironmentSlot {
 public:
  void set(NodeEnvironment env) {
    std::lock_guard<std::mutex> lock(mu_);
    env_ = std::move(env);
    cv_.notify_all();
  }
  // The environment once set; unavailable when it was not set within `timeout`.
  Expected<NodeEnvironment> wait(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return env_.has_value(); })) {
      return unavailable("this node has not joined a cluster (no GCS address after " +
                         std::to_string(timeout.count()) + " ms)");
    }
    return *env_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::optional<NodeEnvironment> env_;
};

}  // namespace troupe::actors
