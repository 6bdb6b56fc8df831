#include "actors/head_process.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "actors/cluster_manager.h"
#include "actors/head_service.h"
#include "actors/heartbeat_receiver.h"
#include "actors/messages.h"
#include "actors/node_runtime.h"
#include "caf/actor_system.hpp"
#include "caf/send.hpp"
#include "core/version.h"
#include "dashboard/dashboard_address.h"
#include "dashboard/dashboard_server.h"
#include "tls/tls_files.h"
#include "gcs/actor_retention.h"
#include "gcs/events.h"
#include "gcs/gcs_stamp.h"
#include "gcs/redis_store.h"
#include "gcs/redis_watchdog.h"

namespace troupe::actors {
namespace {

// Starts the dashboard on a GCS connection of its own (its readers never queue behind the head's
// writes; a short reconnect budget so requests during a GCS outage answer 503 within seconds) and
// records its URL for `troupe up` and `troupe status`. With dashboard_port -1 it only removes the
// URL an earlier head may have left.
// /api/logs of a node: asked of its node manager (at its address in the GCS), within 3 s.
Expected<dashboard::Tail> tail_node_log(ActorSystem& system, const gcs::NodeRecord& node, const dashboard::TailOptions& o) {
  constexpr auto kDeadline = std::chrono::milliseconds(3000);
  auto hp = parse_host_port(node.address);
  if (!hp.ok()) return hp.status();
  auto nm = system.connect(hp->first, hp->second, kDeadline);
  if (!nm.ok()) return nm.status();
  TailLogRequest req;
  req.needles = o.needles;
  req.lines = o.lines;
  req.max_scan_bytes = o.max_scan_bytes;
  req.max_line_bytes = o.max_line_bytes;
  auto reply = request_blocking<TailLogReply>(system.system(), *nm, kDeadline, req,
                                              "reading the log of node " + node.id.short_hex());
  if (!reply.ok()) return reply.status();
  dashboard::Tail t;
  t.file = reply->file;
  t.lines = std::move(reply->lines);
  t.scanned_all = reply->scanned_all;
  t.file_bytes = reply->file_bytes;
  return t;
}

// The dashboard's URL in the GCS, for `troupe up` and `troupe status`.
Status record_dashboard(gcs::Store& gcs, const dashboard::DashboardServer& server) {
  dashboard::DashboardAddress address;
  address.url = server.url();
  address.token_required = server.token_required();
  address.pid = static_cast<int>(::getpid());
  address.started_ms = gcs::now_ms();
  return dashboard::write_dashboard_address(gcs, address);
}

Status start_dashboard(const HeadProcessOptions& o, const gcs::RedisStoreOptions& gcs_options, gcs::Store& gcs,
                       ActorSystem& system, std::unique_ptr<dashboard::DashboardServer>* out) {
  if (o.dashboard_port < 0) return dashboard::clear_dashboard_address(gcs);
  gcs::RedisStoreOptions so = gcs_options;
  so.redis.command_timeout = std::chrono::milliseconds(3000);
  so.redis.reconnect_attempts = 4;
  so.redis.reconnect_deadline = std::chrono::milliseconds(2000);
  auto store = gcs::RedisStore::connect(so);
  if (!store.ok()) return store.status().with_context("head: connecting the dashboard to the GCS");
  auto options = dashboard::DashboardOptions::from_config(o.config, o.bind, o.token);
  options.port = o.dashboard_port;
  auto tls = tls::files_from_env();  // the cluster's TLS files (troupe up --tls)
  if (!tls.ok()) return tls.status().with_context("head: the dashboard's TLS");
  options.tls = *tls;
  options.remote_tail = [&system](const gcs::NodeRecord& n, const dashboard::TailOptions& t) {
    return tail_node_log(system, n, t);
  };
  options.store = std::shared_ptr<gcs::Store>(std::move(*store));
  auto server = dashboard::DashboardServer::start(std::move(options));
  if (!server.ok()) return server.status().with_context("head");
  TROUPE_RETURN_IF_ERROR(record_dashboard(gcs, **server));
  spdlog::info("dashboard on {}{}", (*server)->url(),
               (*server)->token_required() ? " (the cluster token is required)" : "");
  *out = std::move(*server);
  return {};
}

// The GCS answers without the head's stamp: it lost its data. Written again at once (so this is
// said once per loss), with the event gcs_data_lost and the dashboard's address; the head service
// rebuilds the actor and job records (GcsDataLost). The nodes table is rebuilt by the cluster
// manager's tick (ClusterManager::refill).
void check_gcs_kept_its_data(gcs::Store& gcs, const std::string& stamp, const caf::actor& service,
                             const dashboard::DashboardServer* board) {
  auto present = gcs::gcs_stamp_present(gcs, stamp);
  if (!present.ok() || *present) return;
  const std::string what = "the GCS (" + gcs.describe() + ") answers without the records it held: its data was "
                           "lost (a redis-server restarted without its append-only file or data directory)";
  spdlog::error("head: {}; writing back what the live processes know", what);
  Status st = gcs::write_gcs_stamp(gcs, stamp);
  if (st.ok()) st = gcs::record_event(gcs, gcs::Event{0, "gcs_data_lost", "", what + "; the head writes back the "
                                                                          "nodes, actors and jobs it knows"});
  if (st.ok() && board) st = record_dashboard(gcs, *board);
  if (!st.ok()) spdlog::warn("head: after the GCS lost its data: {}", st.to_string());
  caf::anon_send(service, GcsDataLost{what});
}

}  // namespace

// How often the head trims the ended actors' records to the newest ended_actors_kept.
constexpr int64_t kPruneEveryMs = 10000;

// The ended actors beyond the newest `keep` removed from the GCS (gcs/actor_retention.h) when
// `*next_ms` is due; then the next time is set. Failures are logged: the next round tries again.
void prune_ended_actors_when_due(gcs::Store& store, int64_t keep, int64_t* next_ms) {
  const int64_t now = gcs::now_ms();
  if (keep <= 0 || now < *next_ms) return;
  *next_ms = now + kPruneEveryMs;
  auto removed = gcs::prune_ended_actors(store, static_cast<size_t>(keep));
  if (!removed.ok()) {
    spdlog::warn("head: trimming the ended actors' records to the newest {}: {}", keep, removed.status().to_string());
  } else if (*removed > 0) {
    spdlog::info("head: removed {} ended actor record(s) beyond the newest {} (setting ended_actors_kept)", *removed,
                 keep);
  }
}

namespace {

// The GCS the head dials: its own connection, the watchdog's, and (riding out outages) its actors'.
gcs::RedisStoreOptions gcs_options(const HeadProcessOptions& o) {
  gcs::RedisStoreOptions so;
  so.redis.host = o.redis_host;
  so.redis.port = o.redis_port;
  so.redis.password = o.redis_password;
  return so;
}

// With an embedded redis-server: its watchdog, started before the GCS is dialled so that a dead
// server is started again. Null without one.
Expected<std::unique_ptr<gcs::RedisWatchdog>> watch_embedded_redis(const HeadProcessOptions& o,
                                                                   const gcs::RedisStoreOptions& so) {
  if (!o.embedded_redis) return std::unique_ptr<gcs::RedisWatchdog>();
  gcs::RedisWatchdogOptions wo;
  wo.server = *o.embedded_redis;
  wo.pid_files = {o.redis_pid_file};
  wo.on_restart = [so](const std::string& what) {  // its own connection: this is the watchdog's thread
    auto events = gcs::RedisStore::connect(so);
    Status st = events.ok() ? gcs::record_event(**events, gcs::Event{0, "gcs_restarted", "", what})
                            : events.status();
    if (!st.ok()) spdlog::warn("head: recording gcs_restarted: {}", st.to_string());
  };
  auto started = gcs::RedisWatchdog::start(std::move(wo));
  if (!started.ok()) return started.status().with_context("head: watching the embedded redis-server");
  return std::move(*started);
}

// The head service's options; spawns the actor that answers the nodes' heartbeats, so that they
// never wait behind the service's GCS calls.
HeadServiceOptions head_service_options(const HeadProcessOptions& o, gcs::Store& gcs, ClusterManager* cluster,
                                        ActorSystem& system, const NodeId& head_id, const caf::actor& nm) {
  HeadServiceOptions hs;
  hs.store = &gcs;
  hs.cluster = cluster;
  hs.system = &system;
  hs.gcs_info.redis_host = o.redis_host;
  hs.gcs_info.redis_port = o.redis_port;
  hs.gcs_info.redis_password = o.redis_password;
  hs.gcs_info.heartbeat_period_ms = o.config.heartbeat_period_ms;
  hs.gcs_info.heartbeats = spawn_heartbeat_receiver(system.system(), cluster);
  hs.default_policy = o.config.scheduler_policy;
  hs.head_node = head_id;
  hs.head_node_manager = nm;
  return hs;
}

// The head's own node record: the head offers its resources to actors like any node.
gcs::NodeRecord head_record(const NodeId& head_id, const std::string& address, const NodeResources& resources) {
  gcs::NodeRecord self;
  self.id = head_id;
  self.address = address;
  self.hostname = resources.hostname;
  self.pid = static_cast<int>(::getpid());
  self.is_head = true;
  self.version = TROUPE_VERSION_STRING;
  self.total = resources.total;
  self.gpus = resources.gpus;
  return self;
}

// The nodes' state changes of a tick, logged; a node declared DEAD is told to the service.
void announce_transitions(const TickReport& report, const caf::actor& service) {
  for (const NodeTransition& t : report.transitions) {
    spdlog::info("node {}: {} -> {} ({})", t.node.short_hex(), gcs::node_state_name(t.from),
                 gcs::node_state_name(t.to), t.reason);
    if (t.to == gcs::NodeState::dead) caf::anon_send(service, NodeDeclaredDead{t.node.hex(), t.reason});
  }
}

}  // namespace

Status run_head(const HeadProcessOptions& o, const std::atomic<bool>& stop) {
  const gcs::RedisStoreOptions so = gcs_options(o);
  auto watchdog = watch_embedded_redis(o, so);  // before the GCS is dialled: a dead one is started
  if (!watchdog.ok()) return watchdog.status();
  auto store = gcs::RedisStore::connect(so);
  if (!store.ok()) return store.status().with_context("head: connecting to the GCS");
  auto resources = detect_node_resources(o.resources);
  if (!resources.ok()) return resources.status();
  // Declared before the runtime so it outlives the head service, whose actor (in the runtime's
  // actor system) calls it until the system stops.
  std::unique_ptr<ClusterManager> cluster;
  const NodeId head_id = NodeId::random();
  // The devices the head offers as a node (detected, or --gpus), handed to its actors one by one.
  auto gpus = std::make_shared<GpuAssignments>(head_id, static_cast<int>(resources->gpus.size()));
  auto runtime = NodeRuntime::start(o.bind, head_id, o.registry, gpus);
  if (!runtime.ok()) return runtime.status().with_context("head");
  (*runtime)->attach_store(std::move(*store));
  if (o.environment) {  // the head's own actors wait out GCS outages, as the nodes' do
    gcs::RedisStoreOptions patient = so;
    patient.redis = gcs::riding_out(so.redis, std::chrono::milliseconds(o.config.outage_grace_ms));
    o.environment->set({head_id, o.bind, patient, o.config, gpus});
  }
  gcs::Store& gcs = *(*runtime)->store();
  ClusterManagerOptions cmo = ClusterManagerOptions::from_config(o.config, o.token);
  cmo.self = head_id;  // its heartbeat shows whether the head service takes heartbeats
  auto created = ClusterManager::create(gcs, cmo);
  if (!created.ok()) return created.status();
  cluster = std::move(*created);
  ActorSystem& system = (*runtime)->system();
  const caf::actor nm = (*runtime)->node_manager();

  HeadServiceOptions hs = head_service_options(o, gcs, cluster.get(), system, head_id, nm);
  caf::actor service = spawn_head_service(system.system(), hs);
  // The service keeps itself alive (its job watch timer), the receiver waits for heartbeats: every
  // way out of here stops both, or the actor system would wait for them forever.
  struct StopService {
    caf::actor& service;
    caf::actor& receiver;
    ~StopService() {
      caf::anon_send_exit(service, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(receiver, caf::exit_reason::user_shutdown);
    }
  } stop_service{service, hs.gcs_info.heartbeats};
  auto port = system.publish(service, o.port);
  if (!port.ok()) return port.status().with_context("head: publishing the head service");
  adopt_earlier_jobs(service);  // a restarted head: the jobs its predecessor ran
  std::unique_ptr<dashboard::DashboardServer> board;
  TROUPE_RETURN_IF_ERROR(start_dashboard(o, so, gcs, system, &board));
  // Registered last: `troupe up` takes an ALIVE head as ready for nodes to join, so the service must
  // be reachable by then.
  const gcs::NodeRecord self = head_record(head_id, (*runtime)->address(), *resources);
  TROUPE_RETURN_IF_ERROR(cluster->register_node(self, o.token, TROUPE_VERSION_STRING));

  // A GCS that answers without this stamp lost its data (gcs/gcs_stamp.h).
  const std::string stamp = gcs::new_gcs_stamp();
  TROUPE_RETURN_IF_ERROR(gcs::write_gcs_stamp(gcs, stamp));

  spdlog::info("head {} up: service on {}:{}, node manager on {}, GCS {}", head_id.short_hex(), o.bind, *port,
               self.address, gcs.describe());

  uint64_t seq = 0;
  int64_t next_prune_ms = 0;
  while (!stop.load()) {
    // The head heartbeats itself through its service, which knows the head's used resources.
    caf::anon_send(service, Heartbeat{head_id.hex(), ++seq, gcs::now_ms(), 0});
    auto report = cluster->tick();
    int64_t wait_ms = o.config.heartbeat_period_ms;
    if (report.ok()) {
      announce_transitions(*report, service);
      wait_ms = std::max<int64_t>(1, std::min<int64_t>(wait_ms, report->next_tick_ms - gcs::now_ms()));
    } else {
      spdlog::warn("head: failure-detector tick failed: {}", report.status().to_string());
    }
    if (report.ok()) check_gcs_kept_its_data(gcs, stamp, service, board.get());
    if (report.ok()) prune_ended_actors_when_due(gcs, o.config.ended_actors_kept, &next_prune_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
  spdlog::info("head {} stopping", head_id.short_hex());
  if (board) {
    board->stop();
    (void)dashboard::clear_dashboard_address(gcs);
  }
  return {};  // stop_service stops the service
}

}  // namespace troupe::actors
