#include "cli/cluster_commands.h"

#include <signal.h>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "dashboard/dashboard_address.h"
#include "gcs/tables.h"

namespace troupe::cli {
namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }
}  // namespace

const std::atomic<bool>& stop_requested() { return g_stop; }

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

Expected<std::unique_ptr<gcs::RedisStore>> connect_gcs(const ClusterInfo& info) {
  gcs::RedisStoreOptions o;
  o.redis.host = info.redis_host;
  o.redis.port = info.redis_port;
  o.redis.password = info.redis_password;
  o.redis.reconnect_attempts = 3;
  o.redis.reconnect_deadline = std::chrono::milliseconds(3000);
  return gcs::RedisStore::connect(o);
}

gcs::RedisServerOptions embedded_redis_options(const Session& session, const ClusterInfo& info) {
  gcs::RedisServerOptions ro;
  ro.session_dir = session.redis_dir();
  ro.port = info.redis_port;
  ro.password = info.redis_password;
  ro.bind = info.redis_host;
  ro.detach = true;
  ro.tls = info.tls;
  return ro;
}

namespace {

// `message` to the cluster's head from a short-lived actor system here; its reply within `timeout`.
template <class Reply, class Message>
Expected<Reply> ask_head(const ClusterInfo& info, const Message& message, const std::string& what,
                         std::chrono::milliseconds timeout) {
  auto hp = actors::parse_host_port(info.head_address);
  if (!hp.ok()) return hp.status();
  auto sys = actors::ActorSystem::start(actors::ActorSystemOptions{});
  if (!sys.ok()) return sys.status();
  auto head = (*sys)->connect(hp->first, hp->second);
  if (!head.ok()) return head.status().with_context("reaching the head");
  return actors::request_blocking<Reply>((*sys)->system(), *head, timeout, message, what);
}

}  // namespace

Expected<actors::StopJobReply> request_job_stop(const ClusterInfo& info, const JobId& job, const std::string& reason,
                                                std::chrono::milliseconds timeout) {
  return ask_head<actors::StopJobReply>(info, actors::StopJob{job.hex(), reason}, "stopping job " + job.short_hex(),
                                        timeout);
}

Expected<actors::ShutdownNodesReply> request_nodes_shutdown(const ClusterInfo& info, const std::string& reason,
                                                           std::chrono::milliseconds timeout) {
  return ask_head<actors::ShutdownNodesReply>(info, actors::ShutdownNodes{reason}, "asking the nodes to shut down",
                                              timeout);
}

Expected<actors::StopActorReply> request_actor_stop(const ClusterInfo& info, const ActorId& actor,
                                                    const std::string& reason, std::chrono::milliseconds timeout) {
  return ask_head<actors::StopActorReply>(info, actors::StopActor{actor.hex(), reason},
                                          "stopping actor " + actor.short_hex(), timeout);
}

Expected<ActorId> find_actor(gcs::Store& store, const std::string& prefix) {
  if (prefix.size() < 4 || prefix.find_first_not_of("0123456789abcdef") != std::string::npos)
    return invalid_argument("'" + prefix + "' is not an actor id (at least 4 hex digits, as troupe status prints them)");
  auto actors = gcs::Table<gcs::ActorRecord>(store).list();
  if (!actors.ok()) return actors.status();
  std::vector<ActorId> hits;
  for (const gcs::ActorRecord& a : *actors)
    if (a.id.hex().rfind(prefix, 0) == 0) hits.push_back(a.id);
  if (hits.empty()) return not_found("no job or actor " + prefix + " (troupe status lists them)");
  if (hits.size() > 1) return invalid_argument("actor id " + prefix + " is ambiguous: give more digits");
  return hits.front();
}

std::string dashboard_line(gcs::Store& store, const std::string& token) {
  auto address = dashboard::read_dashboard_address(store);
  if (!address.ok()) return "unknown (" + address.status().to_string() + ")";
  if (!address->has_value()) return "off (setting dashboard_port = -1)";
  if ((*address)->token_required && token.empty()) return (*address)->url + "  (needs the cluster token)";
  return dashboard::dashboard_link(**address, token);
}

}  // namespace troupe::cli
