// The head process (`troupe head`, started by `troupe up`): one short composition root.
//
//   GCS (RedisStore) -> ClusterManager -> actor system -> the head's own node manager (the head is
//   a node too) -> head service published on `port` -> the dashboard (dashboard/, on `bind`, its
//   URL recorded in the GCS: dashboard/dashboard_address.h) -> register the head -> loop: tick the
//   failure detector and heartbeat the head itself, until `stop` is set (SIGTERM, SIGINT). With an
//   embedded redis-server, a watchdog thread first (gcs/redis_watchdog.h): it starts the GCS again
//   when it dies or hangs, and records the event "gcs_restarted".
#pragma once

#include <atomic>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>

#include "actors/node_environment.h"
#include "actors/node_resources.h"
#include "actors/registry.h"
#include "core/config.h"
#include "core/status.h"
#include "gcs/redis_server.h"

namespace troupe::actors {

struct HeadProcessOptions {
  std::string redis_host = "127.0.0.1";
  int redis_port = 0;
  std::string redis_password;
  std::string token;                  // the join token nodes must present
  std::string bind = "127.0.0.1";     // address of the head's actor system
  uint16_t port = 0;                  // head service port; 0: pick (logged)
  int dashboard_port = 0;             // the dashboard's port on `bind`; 0: pick, -1: no dashboard
  NodeResourceOptions resources;      // what the head offers as a node
  // The embedded redis-server `troupe up` started (unset: an external --redis): the head restarts
  // it when it dies or hangs (gcs/redis_watchdog.h), writing its new pid to `redis_pid_file`.
  std::optional<gcs::RedisServerOptions> embedded_redis;
  std::string redis_pid_file;
  Config config;
  // The actor types this process hosts (null: the built-ins) and the slot their actors read the
  // node's environment from (filled in once the GCS is known; may be null).
  std::shared_ptr<const Registry> registry;
  std::shared_ptr<NodeEnvironmentSlot> environment;
};

// Runs until `stop` is set; returns why it could not start or had to stop.
Status run_head(const HeadProcessOptions& options, const std::atomic<bool>& stop);

}  // namespace troupe::actors
