// Shared pieces of the actors tests: a node (actor system + published node manager) and a sink that
// records state changes and waits for them with a deadline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "actors/actor_system.h"
#include "actors/messages.h"
#include "actors/node_manager_actor.h"
#include "actors/registry.h"

namespace troupe::actors::test {

// Records every ActorStateChange a node manager reports; thread-safe.
class RecordingSink {
 public:
  StateSink sink() {
    return [this](const ActorStateChange& c) {
      std::lock_guard<std::mutex> lock(mu_);
      changes_.push_back(c);
      cv_.notify_all();
    };
  }
  // Waits up to `timeout` for a change matching `pred`; copies it to *out when found.
  bool wait_for(const std::function<bool(const ActorStateChange&)>& pred, ActorStateChange* out,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      for (const auto& c : changes_) {
        if (pred(c)) {
          if (out) *out = c;
          return true;
        }
      }
      return false;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ActorStateChange> changes_;
};

// One "node process" in the test process: its own actor system with a published node manager.
struct TestNode {
  RecordingSink states;  // first: it must outlive the system, whose shutdown still reports to it
  std::unique_ptr<ActorSystem> sys;
  caf::actor node_manager;
  uint16_t port = 0;

  // `gpus`: the devices its node manager hands out (null: none).
  explicit TestNode(std::shared_ptr<const Registry> registry = nullptr,
                    const std::string& policy = "sharing", std::shared_ptr<GpuAssignments> gpus = nullptr) {
    ActorSystemOptions opts;
    opts.scheduler_policy = policy;
    opts.worker_threads = 2;
    auto started = ActorSystem::start(opts);
    REQUIRE(started.ok());
    sys = std::move(*started);
    NodeManagerOptions nm;
    nm.registry = std::move(registry);
    nm.on_state_change = states.sink();
    nm.gpus = std::move(gpus);
    node_manager = spawn_node_manager(sys->system(), std::move(nm));
    auto bound = sys->publish(node_manager);
    REQUIRE(bound.ok());
    port = *bound;
  }
  ~TestNode() { node_manager = nullptr; }  // the system stops the published node manager
};

// A bare actor system standing in for the head.
inline std::unique_ptr<ActorSystem> start_head() {
  ActorSystemOptions opts;
  opts.scheduler_policy = "sharing";
  opts.worker_threads = 2;
  auto started = ActorSystem::start(opts);
  REQUIRE(started.ok());
  return std::move(*started);
}

}  // namespace troupe::actors::test
