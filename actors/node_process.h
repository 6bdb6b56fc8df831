// A node process (`troupe up --address HOST:PORT --token T`, or started by `troupe up --nodes N`):
// one short composition root.
//
//   actor system -> node manager published -> join the head (token, version, resources; the head
//   answers with the GCS address) -> GCS connection for actor records -> loop: heartbeat to the
//   head every heartbeat_period_ms until `stop` is set, or the head declares this node DEAD, or
//   the head stays unreachable for the setting outage_grace_ms (60 s): until then the node keeps its
//   actors, and its GCS clients (its own and its actors') reconnect for as long.
#pragma once

#include <atomic>
#include <memory>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "actors/node_environment.h"
#include "actors/node_resources.h"
#include "actors/registry.h"
#include "core/config.h"
#include "core/status.h"

namespace troupe::actors {

struct NodeProcessOptions {
  std::string head_address;           // host:port of the head service
  std::string token;
  std::string bind = "127.0.0.1";     // address this node's actor system listens on
  NodeResourceOptions resources;
  std::string version;                // empty: this build's (tests join with another to see refusal)
  std::chrono::milliseconds join_timeout{10000};
  Config config;
  // The actor types this process hosts (null: the built-ins) and the slot their actors read the
  // node's environment from (filled in once the GCS is known; may be null).
  std::shared_ptr<const Registry> registry;
  std::shared_ptr<NodeEnvironmentSlot> environment;
};

// Runs until `stop` is set. Errors: unavailable (head unreachable), invalid_argument (wrong token,
// or declared DEAD by the head), version_mismatch, and whatever the GCS connection reports.
// `on_joined` (may be empty) runs once the head admitted the node and the GCS is reachable.
Status run_node(const NodeProcessOptions& options, const std::atomic<bool>& stop,
                const std::function<void()>& on_joined = {});

}  // namespace troupe::actors
