#include "actors/head_process.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/actor_system.h"
#include "actors/cluster_manager.h"
#include "actors/head_service.h"
#include "actors/node_runtime.h"
#include "caf/actor_system.hpp"
#include "caf/send.hpp"
#include "core/version.h"
#include "gcs/events.h"
#include "gcs/redis_store.h"

namespace troupe::actors {

Status run_head(const HeadProcessOptions& o, const std::atomic<bool>& stop) {
  gcs::RedisStoreOptions so;
  so.redis.host = o.redis_host;
  so.redis.port = o.redis_port;
  so.redis.password = o.redis_password;
  auto store = gcs::RedisStore::connect(so);
  if (!store.ok()) return store.status().with_context("head: connecting to the GCS");
  auto resources = detect_node_resources(o.resources);
  if (!resources.ok()) return resources.status();
  // Declared before the runtime so it outlives the head service, whose actor (in the runtime's
  // actor system) calls it until the system stops.
  std::unique_ptr<ClusterManager> cluster;
  const NodeId head_id = NodeId::random();
  auto runtime = NodeRuntime::start(o.bind, head_id, o.registry);
  if (!runtime.ok()) return runtime.status().with_context("head");
  (*runtime)->attach_store(std::move(*store));
  if (o.environment) o.environment->set({head_id, o.bind, so, o.config});
  gcs::Store& gcs = *(*runtime)->store();
  auto created = ClusterManager::create(gcs, ClusterManagerOptions::from_config(o.config, o.token));
  if (!created.ok()) return created.status();
  cluster = std::move(*created);
  ActorSystem& system = (*runtime)->system();
  const caf::actor nm = (*runtime)->node_manager();

  HeadServiceOptions hs;
  hs.store = &gcs;
  hs.cluster = cluster.get();
  hs.system = &system;
  hs.gcs_info.redis_host = o.redis_host;
  hs.gcs_info.redis_port = o.redis_port;
  hs.gcs_info.redis_password = o.redis_password;
  hs.gcs_info.heartbeat_period_ms = o.config.heartbeat_period_ms;
  hs.default_policy = o.config.scheduler_policy;
  hs.head_node = head_id;
  hs.head_node_manager = nm;
  caf::actor service = spawn_head_service(system.system(), hs);
  auto port = system.publish(service, o.port);
  if (!port.ok()) return port.status().with_context("head: publishing the head service");
  // Registered last: `troupe up` takes an ALIVE head as ready for nodes to join, so the service must
  // be reachable by then.
  gcs::NodeRecord self;
  self.id = head_id;
  self.address = (*runtime)->address();
  self.hostname = resources->hostname;
  self.pid = static_cast<int>(::getpid());
  self.is_head = true;
  self.version = TROUPE_VERSION_STRING;
  self.total = resources->total;
  self.gpus = resources->gpus;
  TROUPE_RETURN_IF_ERROR(cluster->register_node(self, o.token, TROUPE_VERSION_STRING));

  spdlog::info("head {} up: service on {}:{}, node manager on {}, GCS {}", head_id.short_hex(), o.bind, *port,
               self.address, gcs.describe());

  uint64_t seq = 0;
  while (!stop.load()) {
    // The head heartbeats itself through its service, which knows the head's used resources.
    caf::anon_send(service, Heartbeat{head_id.hex(), ++seq, gcs::now_ms(), 0});
    auto report = cluster->tick();
    int64_t wait_ms = o.config.heartbeat_period_ms;
    if (report.ok()) {
      for (const NodeTransition& t : report->transitions) {
        spdlog::info("node {}: {} -> {} ({})", t.node.short_hex(), gcs::node_state_name(t.from),
                     gcs::node_state_name(t.to), t.reason);
      }
      wait_ms = std::max<int64_t>(1, std::min<int64_t>(wait_ms, report->next_tick_ms - gcs::now_ms()));
    } else {
      spdlog::warn("head: failure-detector tick failed: {}", report.status().to_string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
  spdlog::info("head {} stopping", head_id.short_hex());
  caf::anon_send_exit(service, caf::exit_reason::user_shutdown);
  return {};
}

}  // namespace troupe::actors
