// What every process that hosts actors runs — the head and each node: the actor system, the
// published node manager, and the writer that records its actors' exits in the GCS. Owning them in
// one object fixes their order: on the way down the actor system stops first (its actors' last
// reports reach the writer), then the writer drains into the store, then the store closes.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "actors/actor_state_writer.h"
#include "actors/actor_system.h"
#include "actors/gpu_assignment.h"
#include "actors/node_stats_publisher.h"
#include "actors/registry.h"
#include "caf/actor.hpp"
#include "core/ids.h"
#include "gcs/store.h"

namespace troupe::actors {

class NodeRuntime {
 public:
  // Starts an actor system on `bind` and publishes a node manager for node `id` on a free port.
  // `registry`: the actor types its node manager can spawn (null: the built-ins). `gpus`: the
  // node's devices its node manager hands out (null: none; see NodeManagerOptions::gpus).
  static Expected<std::unique_ptr<NodeRuntime>> start(const std::string& bind, const NodeId& id,
                                                      std::shared_ptr<const Registry> registry = nullptr,
                                                      std::shared_ptr<GpuAssignments> gpus = nullptr);
  ~NodeRuntime();

  // Hands over the GCS connection: from now on the actors' exits are written there, and this
  // process's resource use every 5 s (gcs/node_stats.h, for the head's /metrics).
  void attach_store(std::unique_ptr<gcs::Store> store);
  gcs::Store* store() { return store_.get(); }

  ActorSystem& system() { return *system_; }
  const caf::actor& node_manager() const { return node_manager_; }
  const NodeId& id() const { return id_; }
  const std::string& address() const { return address_; }  // host:port of the node manager
  // Whether the node manager was asked to shut the process down (ShutdownNode: `troupe down`
  // through the head), and why. The node process's loop polls it (actors/node_process.cc).
  bool shutdown_requested(std::string* reason = nullptr) const;

 private:
  NodeRuntime() = default;
  std::unique_ptr<gcs::Store> store_;        // destroyed last
  NodeStatsPublisher stats_;                 // the process's figures to the GCS (stopped before it closes)
  ActorStateWriter writer_;
  std::unique_ptr<ActorSystem> system_;      // destroyed first
  caf::actor node_manager_;
  NodeId id_;
  std::string address_;
  struct Shutdown {
    std::atomic<bool> requested{false};
    std::mutex mu;
    std::string reason;
  };
  std::shared_ptr<Shutdown> shutdown_ = std::make_shared<Shutdown>();
};

}  // namespace troupe::actors
