#include "actors/node_process.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "actors/head_messages.h"
#include "actors/node_runtime.h"
#include "actors/node_manager_client.h"
#include "core/version.h"
#include "gcs/events.h"
#include "gcs/redis_store.h"
#include "tls/tls_relay.h"

namespace troupe::actors {
namespace {

// The head a node talks to: its service, and where its heartbeats go.
struct HeadHandles {
  caf::actor service;
  caf::actor heartbeats;  // the heartbeat receiver, or the service (a head that offers none)
};

HeadHandles handles_of(const caf::actor& service, const RegisterReply& reply) {
  return {service, reply.heartbeats ? reply.heartbeats : service};
}

// After a failed heartbeat: whether a head answers at its address that is not `current` (the head
// process restarted there); if so, registers this node with it again (same id, resources and node
// manager) and returns its handles. nullopt: the same head (a slow or stopped one) or none reachable.
Expected<std::optional<HeadHandles>> rejoin(ActorSystem& system, const caf::actor& current,
                                            const std::pair<std::string, uint16_t>& head, const RegisterNode& reg,
                                            std::chrono::milliseconds timeout) {
  auto now = system.connect(head.first, head.second, timeout);
  if (!now.ok() || *now == current) return std::optional<HeadHandles>();
  auto joined = request_blocking<RegisterReply>(system.system(), *now, timeout, reg,
                                                "registering again with the head at " + head.first + ":" +
                                                    std::to_string(head.second));
  if (!joined.ok()) {
    if (joined.status().code() == Code::invalid_argument) return joined.status();
    return std::optional<HeadHandles>();
  }
  return std::optional<HeadHandles>(handles_of(*now, *joined));
}

using HostPort = std::pair<std::string, uint16_t>;

// The head's service, connected to. The head may still be starting: a refused connection is tried
// again until the join deadline (--join-timeout), or until `stop`.
Expected<caf::actor> connect_to_head(ActorSystem& system, const NodeProcessOptions& o, const HostPort& head_hp,
                                     const std::atomic<bool>& stop) {
  const auto join_deadline = std::chrono::steady_clock::now() + o.join_timeout;
  if (auto tls = tls::process_tls(); !tls.ok()) {
    return tls.status().with_context("this node's TLS files");
  } else if (*tls) {
    // CAF reports a refused TLS handshake as a failed connection: check the certificates first, so
    // that a node whose certificate the head refuses says so.
    Status probed = tls::probe(head_hp.first, head_hp.second, **tls, o.join_timeout);
    if (probed.code() == Code::invalid_argument) return probed.with_context("joining the head at " + o.head_address);
  }
  Expected<caf::actor> head = unavailable("not tried");
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(join_deadline - std::chrono::steady_clock::now());
    head = system.connect(head_hp.first, head_hp.second, std::max(left, std::chrono::milliseconds(1)));
    if (head.ok() || head.status().code() != Code::unavailable || std::chrono::steady_clock::now() >= join_deadline) break;
    if (stop.load()) return unavailable("stopped while joining the head at " + o.head_address);
    auto tls = tls::process_tls();
    spdlog::info("head at {} not reachable yet ({}); retrying{}", o.head_address, head.status().message(),
                 tls.ok() && !*tls ? " (if the cluster runs with TLS, join with --tls-ca, --tls-cert and --tls-key)" : "");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!head.ok()) {
    Status st = head.status().with_context("joining the head at " + o.head_address);
    auto tls = tls::process_tls();
    if (tls.ok() && !*tls)
      st = Status(st.code(), st.message() + " (a cluster started with `troupe up --tls` answers TLS only: join it with "
                                            "--tls-ca, --tls-cert and --tls-key)");
    return st;
  }
  return head;
}

// What this node presents to the head when it joins, and again to a head restarted at its address.
RegisterNode registration(const NodeProcessOptions& o, const NodeId& id, const std::string& address,
                          const NodeResources& resources) {
  RegisterNode reg;
  reg.token = o.token;
  reg.version = o.version.empty() ? TROUPE_VERSION_STRING : o.version;
  reg.node_id = id.hex();
  reg.address = address;
  reg.hostname = resources.hostname;
  reg.pid = static_cast<int32_t>(::getpid());
  reg.cpus = resources.total.cpus;
  reg.gpus = resources.total.gpus;
  reg.memory_bytes = resources.total.memory_bytes;
  for (const gcs::GpuInfo& g : resources.gpus) {
    reg.gpu_names.push_back(g.name);
    reg.gpu_memory_bytes.push_back(g.memory_bytes);
  }
  return reg;
}

// Connects the node's runtime to the GCS the head named; returns the connection's options, which
// the node's actors dial with.
Expected<gcs::RedisStoreOptions> connect_gcs(NodeRuntime& runtime, const RegisterReply& joined,
                                             const NodeProcessOptions& o, const NodeId& id) {
  gcs::RedisStoreOptions so;
  so.redis.host = joined.redis_host;
  so.redis.port = joined.redis_port;
  so.redis.password = joined.redis_password;
  // This node and its actors (job workers) wait out a GCS that is away, as long as they wait for the head.
  so.redis = gcs::riding_out(so.redis, std::chrono::milliseconds(o.config.outage_grace_ms));
  auto store = gcs::RedisStore::connect(so);
  if (!store.ok()) return store.status().with_context("node " + id.short_hex() + ": connecting to the GCS");
  runtime.attach_store(std::move(*store));
  return so;
}

// A node the head admitted: what its heartbeats, and a registration with a restarted head, need.
struct Joined {
  NodeId id;
  HostPort head;
  RegisterNode reg;
  HeadHandles to;
  std::chrono::milliseconds period;
};

// Heartbeats to the head every period until `stop` or a shutdown request. A head restarted at its
// address is registered with again; a head that refuses this node, or stays silent for longer than
// outage_grace_ms, ends the loop with an error.
Status heartbeat_until_stopped(NodeRuntime& runtime, const NodeProcessOptions& o, Joined node,
                               const std::atomic<bool>& stop) {
  ActorSystem& system = runtime.system();
  const NodeId& id = node.id;
  const auto period = node.period;
  const auto grace = std::chrono::milliseconds(o.config.outage_grace_ms);
  HeadHandles& to = node.to;
  auto last_ack = std::chrono::steady_clock::now();
  bool missing = false;  // heartbeats unanswered since last_ack (logged once, and once when back)
  uint64_t seq = 0;
  std::string shutdown_reason;
  while (!stop.load()) {
    if (runtime.shutdown_requested(&shutdown_reason)) {
      spdlog::info("node {}: shutting down ({})", id.short_hex(), shutdown_reason);
      break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto ack = request_blocking<HeartbeatAck>(system.system(), to.heartbeats, period * 2,
                                              Heartbeat{id.hex(), ++seq, gcs::now_ms(), 0},
                                              "heartbeat to the head at " + o.head_address);
    if (ack.ok()) {
      if (missing) {
        spdlog::info("node {}: the head answers again after {}", id.short_hex(),
                     format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - last_ack)));
      }
      missing = false;
      last_ack = std::chrono::steady_clock::now();
    } else if (ack.status().code() == Code::invalid_argument || ack.status().code() == Code::not_found) {
      return ack.status().with_context("node " + id.short_hex() + " was refused by the head; stopping");
    } else if (auto again = rejoin(system, to.service, node.head, node.reg, period * 2); again.ok() && *again) {
      // The head restarted at its address: this node registered again, with its id and its actors.
      to = **again;
      missing = false;
      last_ack = std::chrono::steady_clock::now();
      spdlog::info("node {} registered again with the head at {} (the head restarted)", id.short_hex(), o.head_address);
    } else if (!again.ok() && again.status().code() == Code::invalid_argument) {
      return again.status().with_context("node " + id.short_hex() + " was refused by the restarted head; stopping");
    } else if (std::chrono::steady_clock::now() - last_ack > grace) {
      return unavailable("node " + id.short_hex() + ": no answer from the head at " + o.head_address + " for " +
                         format_duration(grace) + " (outage_grace_ms; last: " + ack.status().message() +
                         "); its actors stop with it");
    } else if (!missing) {
      missing = true;
      spdlog::warn("node {}: the head at {} does not answer ({}); keeping this node's actors and trying for up "
                   "to {} (outage_grace_ms)", id.short_hex(), o.head_address, ack.status().message(),
                   format_duration(grace));
    }
    // Sleep out the period in short naps, so a shutdown request is acted on at once.
    while (std::chrono::steady_clock::now() < t0 + period && !stop.load() && !runtime.shutdown_requested()) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(20),
                                                                               t0 + period - std::chrono::steady_clock::now()));
    }
  }
  return {};
}

}  // namespace

Status run_node(const NodeProcessOptions& o, const std::atomic<bool>& stop, const std::function<void()>& on_joined) {
  auto head_hp = parse_host_port(o.head_address);
  if (!head_hp.ok()) return head_hp.status().with_context("--address");
  auto resources = detect_node_resources(o.resources);
  if (!resources.ok()) return resources.status();

  const NodeId id = NodeId::random();
  // The devices this node offers (detected, or --gpus), handed to its actors one by one.
  auto gpus = std::make_shared<GpuAssignments>(id, static_cast<int>(resources->gpus.size()));
  auto runtime = NodeRuntime::start(o.bind, id, o.registry, gpus);
  if (!runtime.ok()) return runtime.status();
  ActorSystem& system = (*runtime)->system();

  auto head = connect_to_head(system, o, *head_hp, stop);
  if (!head.ok()) return head.status();
  const RegisterNode reg = registration(o, id, (*runtime)->address(), *resources);
  auto joined = request_blocking<RegisterReply>(system.system(), *head, o.join_timeout, reg,
                                                "joining the head at " + o.head_address);
  if (!joined.ok()) return joined.status();
  auto so = connect_gcs(**runtime, *joined, o, id);
  if (!so.ok()) return so.status();
  if (o.environment) o.environment->set({id, o.bind, *so, o.config, gpus});
  spdlog::info("node {} joined the head at {} ({} cpus, {} gpus); node manager on {}", id.short_hex(),
               o.head_address, reg.cpus, reg.gpus, reg.address);
  if (on_joined) on_joined();

  const auto period = std::chrono::milliseconds(joined->heartbeat_period_ms);
  TROUPE_RETURN_IF_ERROR(heartbeat_until_stopped(**runtime, o, {id, *head_hp, reg, handles_of(*head, *joined), period}, stop));
  spdlog::info("node {} stopping", id.short_hex());
  return {};
}

}  // namespace troupe::actors
