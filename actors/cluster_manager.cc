#include "actors/cluster_manager.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "actors/scheduler.h"  // describe_resources
#include "core/version.h"
#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::actors {

using gcs::ActorRecord;
using gcs::NodeRecord;
using gcs::NodeState;

ClusterManagerOptions ClusterManagerOptions::from_config(const Config& config, std::string cluster_token) {
  ClusterManagerOptions o;
  o.cluster_token = std::move(cluster_token);
  o.version = TROUPE_VERSION_STRING;
  o.detector = FailureDetectorOptions::from_config(config);
  o.heartbeat_period_ms = config.heartbeat_period_ms;
  return o;
}

Status ClusterManagerOptions::validate() const {
  if (cluster_token.empty()) return invalid_argument("cluster manager: the cluster token is empty; the head must set one");
  if (version.empty()) return invalid_argument("cluster manager: the head's troupe version is empty");
  TROUPE_RETURN_IF_ERROR(detector.validate());
  if (heartbeat_period_ms <= 0 || heartbeat_period_ms >= detector.suspect_after_ms) {
    return invalid_argument("cluster manager: heartbeat_period_ms (" + std::to_string(heartbeat_period_ms) +
                            ") must be > 0 and below node_suspect_after_ms (" +
                            std::to_string(detector.suspect_after_ms) + "), or healthy nodes look silent");
  }
  return {};
}

namespace {

std::string label(const NodeRecord& n) {
  std::string where = n.hostname;
  if (!n.address.empty()) where += (where.empty() ? "" : " ") + n.address;
  return "node " + n.id.short_hex() + (where.empty() ? "" : " (" + where + ")");
}

// Compares in time independent of where the strings differ (the token is a secret).
bool same_secret(const std::string& presented, const std::string& secret) {
  if (secret.empty()) return false;
  size_t diff = presented.size() ^ secret.size();
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= p ^ static_cast<unsigned char>(secret[i]);
  }
  return diff == 0;
}

Status check_resources(const gcs::Resources& r, const std::string& what) {
  if (!std::isfinite(r.cpus) || r.cpus < 0 || !std::isfinite(r.gpus) || r.gpus < 0 || r.memory_bytes < 0) {
    return invalid_argument(what + " are not finite and >= 0 (cpus " + std::to_string(r.cpus) + ", gpus " +
                            std::to_string(r.gpus) + ", memory " + std::to_string(r.memory_bytes) + " bytes)");
  }
  return {};
}

const char* event_kind(NodeState to) {
  return to == NodeState::dead ? "node_died" : to == NodeState::suspect ? "node_suspect" : "node_recovered";
}

}  // namespace

Expected<std::unique_ptr<ClusterManager>> ClusterManager::create(gcs::Store& store, ClusterManagerOptions options) {
  TROUPE_RETURN_IF_ERROR(options.validate());
  std::unique_ptr<ClusterManager> m(new ClusterManager(store, std::move(options)));
  // The nodes an earlier head left, so heartbeats can be checked from the start; a GCS that does
  // not answer now leaves it to the first tick (heartbeats of unknown nodes are taken until then).
  auto listed = gcs::Table<NodeRecord>(store).list();
  if (listed.ok()) {
    std::lock_guard<std::mutex> lock(m->heard_mu_);
    for (const NodeRecord& n : *listed) m->remember(n);
    m->table_read_ = true;
  }
  return m;
}

ClusterManager::ClusterManager(gcs::Store& store, ClusterManagerOptions options)
    : store_(store), options_(std::move(options)), detector_(options_.detector) {
  if (!options_.clock) options_.clock = gcs::now_ms;
  if (!options_.monotonic) {
    options_.monotonic = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  created_ms_ = options_.clock();
}

int64_t ClusterManager::now() const { return options_.clock(); }

Status ClusterManager::register_node(NodeRecord node, const std::string& token, const std::string& version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (node.id.nil()) return invalid_argument("register node: the node id is nil (" + label(node) + ")");
  if (!same_secret(token, options_.cluster_token)) {
    spdlog::warn("refused {}: wrong cluster token", label(node));
    return invalid_argument("register " + label(node) + ": the node presented a wrong cluster token; start it "
                            "with the token the head printed at `troupe up` (or the head's token file)");
  }
  if (version != options_.version) {
    spdlog::warn("refused {}: it runs troupe {}, the head runs {}", label(node), version, options_.version);
    return {Code::version_mismatch, "register " + label(node) + ": the node runs troupe " + version +
                                        " but the head runs troupe " + options_.version +
                                        "; install the same troupe version on every machine"};
  }
  TROUPE_RETURN_IF_ERROR(check_resources(node.total, "register " + label(node) + ": its total resources"));
  TROUPE_RETURN_IF_ERROR(check_resources(node.used, "register " + label(node) + ": its used resources"));

  gcs::Table<NodeRecord> nodes(store_);
  auto existing = nodes.get(node.id.hex());
  bool rejoin = false;
  if (existing.ok()) {
    if (existing->state == NodeState::dead) {
      spdlog::warn("refused {}: this node id was declared DEAD ({})", label(node), existing->death_reason);
      return invalid_argument("register " + label(node) + ": this node id was declared DEAD (" +
                              existing->death_reason + ") and its actors with it; restart the node process, "
                              "which joins with a new id");
    }
    rejoin = true;
  } else if (existing.status().code() != Code::not_found) {
    return existing.status().with_context("register " + label(node) + ": reading the nodes table");
  }

  const int64_t t = now();
  node.version = version;
  node.state = NodeState::alive;
  node.last_heartbeat_ms = t;
  if (node.started_ms == 0) node.started_ms = t;
  node.death_reason.clear();
  TROUPE_RETURN_IF_ERROR(nodes.put(node).with_context("register " + label(node) + ": writing the nodes table"));
  {
    std::lock_guard<std::mutex> heard(heard_mu_);
    remember(node);
    heard_ms_[node.id] = t;
    used_[node.id] = node.used;
  }
  spdlog::info("{} {}: {}", label(node), rejoin ? "registered again" : "joined", describe_resources(node.total));
  return gcs::record_event(store_, {t, "node_joined", node.id.hex(),
                                    label(node) + (rejoin ? " registered again: " : " joined: ") +
                                        describe_resources(node.total)});
}

Status ClusterManager::heartbeat(const NodeId& id, const gcs::Resources& used) { return take_heartbeat(id, &used); }

Status ClusterManager::heartbeat(const NodeId& id) { return take_heartbeat(id, nullptr); }

void ClusterManager::note_used(const std::map<NodeId, gcs::Resources>& used) {
  std::lock_guard<std::mutex> lock(heard_mu_);
  for (const auto& [id, r] : used) {
    if (known_.count(id)) used_[id] = r;
  }
}

Status ClusterManager::take_heartbeat(const NodeId& id, const gcs::Resources* used) {
  const std::string who = "heartbeat from node " + id.short_hex();
  if (used) TROUPE_RETURN_IF_ERROR(check_resources(*used, who + ": its used resources"));
  std::lock_guard<std::mutex> lock(heard_mu_);
  auto known = known_.find(id);
  if (known == known_.end() && table_read_) {
    return not_found(who + ": no such node is registered; the node must register (restart it)");
  }
  if (known != known_.end() && known->second.state == NodeState::dead) {
    return invalid_argument(who + ": the node was declared DEAD (" + known->second.death_reason +
                            ") and its actors with it; stop it and start a new node process");
  }
  heard_ms_[id] = now();
  if (used) used_[id] = *used;
  return {};
}

void ClusterManager::remember(const NodeRecord& node) { known_[node.id] = node; }

Status ClusterManager::refill(std::vector<NodeRecord>* listed, int64_t now_ms) {
  std::set<NodeId> there;
  for (const NodeRecord& n : *listed) there.insert(n.id);
  std::vector<NodeRecord> lost;
  {
    std::lock_guard<std::mutex> heard(heard_mu_);
    for (const auto& [id, rec] : known_) {
      if (rec.state == NodeState::dead || there.count(id)) continue;
      lost.push_back(rec);
      auto h = heard_ms_.find(id);
      if (h != heard_ms_.end()) lost.back().last_heartbeat_ms = std::max(rec.last_heartbeat_ms, h->second);
      auto u = used_.find(id);
      if (u != used_.end()) lost.back().used = u->second;
    }
  }
  if (lost.empty()) return {};
  TROUPE_RETURN_IF_ERROR(gcs::Table<NodeRecord>(store_).put_many(lost).with_context("writing lost nodes back"));
  std::string names;
  for (const NodeRecord& n : lost) names += (names.empty() ? "" : ", ") + n.id.short_hex();
  const std::string message = "the GCS had lost " + std::to_string(lost.size()) + " live node record" +
                              (lost.size() == 1 ? "" : "s") + " (" + names +
                              "; its data was lost?): written again from the head's memory";
  spdlog::warn("{}", message);
  listed->insert(listed->end(), lost.begin(), lost.end());
  return gcs::record_event(store_, {now_ms, "gcs_refilled", "", message});
}

Status ClusterManager::on_connection_lost(const NodeId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  gcs::Table<NodeRecord> nodes(store_);
  auto node = nodes.get(id.hex());
  if (!node.ok()) return node.status().with_context("connection to node " + id.short_hex() + " lost");
  auto tr = detector_.connection_lost(*node);
  if (!tr) return {};
  int unused = 0;
  return apply(std::move(*node), *tr, now(), &unused);
}

namespace {

bool same_resources(const gcs::Resources& a, const gcs::Resources& b) {
  return a.cpus == b.cpus && a.gpus == b.gpus && a.memory_bytes == b.memory_bytes;
}

// A tick long after the one before: the head itself did not run (stopped, or starved of CPU), so
// it heard nobody meanwhile and the nodes' silence is its own. Timed on the head's monotonic
// clock: the wall clock may jump. `entered` is when the tick began, on the wall clock.
void note_head_pause(const ClusterManagerOptions& o, int64_t now_ms, int64_t entered, int64_t* last_tick_ms,
                     int64_t* grace_until_ms) {
  const int64_t ran = o.monotonic();
  if (*last_tick_ms > 0 && ran - *last_tick_ms > o.detector.suspect_after_ms) {
    *grace_until_ms = std::max(*grace_until_ms, std::max(now_ms, entered) + o.detector.dead_after_ms);
    spdlog::warn("the head did not run for {} ms (stopped or starved): no node is suspected for the next {} ms",
                 ran - *last_tick_ms, o.detector.dead_after_ms);
  }
  *last_tick_ms = ran;
}

// After the tick's read of the nodes table, begun at `entered`: a GCS that was away (or answered
// late) leaves the nodes a full timeout before any is suspected.
void note_store_outage(const ClusterManagerOptions& o, int64_t now_ms, int64_t entered, bool* store_outage,
                       int64_t* grace_until_ms) {
  // A read that waited out a GCS restart inside the client's reconnect budget succeeds late, as
  // does one queued behind a heartbeat that did: heartbeats could not be taken meanwhile either.
  const int64_t stalled = o.clock() - entered;
  if (stalled > o.detector.suspect_after_ms && !*store_outage) {
    spdlog::info("the GCS answered the head only after {} ms", stalled);
    *store_outage = true;
  }
  if (*store_outage) {
    // The silence is the store's, not the nodes': give every node a full timeout from now before
    // suspecting it (heartbeats taken meanwhile are in memory, but a node may have been between
    // reconnects while the head stalled on the store).
    *store_outage = false;
    // From the time the GCS answered, not the tick's (taken before a read that may have stalled).
    *grace_until_ms = std::max(*grace_until_ms, std::max(now_ms, o.clock()) + o.detector.dead_after_ms);
    spdlog::info("GCS reachable again: no node is suspected for the next {} ms", o.detector.dead_after_ms);
  }
}

// Is the head service taking heartbeats? (options.self) While its own heartbeat is overdue no node
// is suspected; once it comes again, a short grace follows.
void note_service_stall(const ClusterManagerOptions& o, int64_t now_ms, const std::map<NodeId, int64_t>& heard,
                        bool* service_stalled, int64_t* grace_until_ms) {
  if (!o.self) return;
  auto own = heard.find(*o.self);
  // Sent every tick: two periods without it (before any node could be suspected) is a stall.
  const int64_t limit = std::min(2 * o.heartbeat_period_ms, o.detector.suspect_after_ms / 2);
  const bool overdue = own != heard.end() && now_ms - own->second > limit;
  if (overdue && !*service_stalled) {
    spdlog::warn("the head service has not taken the head's own heartbeat for {} ms (busy): no node is suspected "
                 "until it does", now_ms - own->second);
    *service_stalled = true;
  } else if (!overdue && *service_stalled) {
    // Its mailbox is drained in order, the nodes' heartbeats that waited there with it: a short
    // grace covers a tick that runs during the drain; a node that sent nothing while the service
    // was busy is as silent as it looks.
    *service_stalled = false;
    *grace_until_ms = std::max(*grace_until_ms, std::max(now_ms, o.clock()) + o.detector.suspect_after_ms);
    spdlog::info("the head service takes heartbeats again: no node is suspected for the next {} ms",
                 o.detector.suspect_after_ms);
  }
}

// Brings a listed record up to date with what its node's heartbeats noted since it was written (a
// DEAD node's are not taken): true when that changed it.
bool take_heard(NodeRecord* n, const std::map<NodeId, int64_t>& heard, const std::map<NodeId, gcs::Resources>& used) {
  auto h = heard.find(n->id);
  if (h == heard.end() || n->state == NodeState::dead) return false;
  bool fresh = false;
  if (h->second > n->last_heartbeat_ms) {
    n->last_heartbeat_ms = h->second;
    fresh = true;
  }
  auto u = used.find(n->id);
  if (u != used.end() && !same_resources(u->second, n->used)) {
    n->used = u->second;
    fresh = true;
  }
  return fresh;
}

}  // namespace

Expected<TickReport> ClusterManager::tick(int64_t now_ms) {
  const int64_t entered = now();
  std::lock_guard<std::mutex> lock(mu_);
  note_head_pause(options_, now_ms, entered, &last_tick_ms_, &grace_until_ms_);
  auto listed = gcs::Table<NodeRecord>(store_).list();
  if (!listed.ok()) {
    store_outage_ = true;
    return listed.status().with_context("cluster manager tick: reading the nodes table");
  }
  note_store_outage(options_, now_ms, entered, &store_outage_, &grace_until_ms_);
  std::map<NodeId, int64_t> heard;  // what heartbeats noted since, copied out of their lock
  std::map<NodeId, gcs::Resources> used;
  {
    std::lock_guard<std::mutex> h(heard_mu_);
    heard = heard_ms_;
    used = used_;
  }
  note_service_stall(options_, now_ms, heard, &service_stalled_, &grace_until_ms_);
  std::vector<NodeRecord>& nodes = *listed;
  TROUPE_RETURN_IF_ERROR(refill(&nodes, now_ms).with_context("cluster manager tick"));
  std::sort(nodes.begin(), nodes.end(), [](const NodeRecord& a, const NodeRecord& b) { return a.id < b.id; });
  if (!swept_at_start_) {  // a new head finishes what a previous one may have left half done
    for (const auto& n : nodes) {
      if (n.state == NodeState::dead) unswept_.insert(n.id);
    }
    swept_at_start_ = true;
  }

  TickReport report;
  std::vector<NodeRecord> beats;  // nodes heard since their record was written, with nothing else to write
  for (auto& n : nodes) {
    const int64_t recorded = n.last_heartbeat_ms;
    const bool fresh = take_heard(&n, heard, used);
    auto h = heard.find(n.id);
    // A node of an earlier head (a restarted head) heartbeats to nobody until it reconnects and
    // registers again: its silence is timed from this manager's start, not from its last record.
    if (h == heard.end() && n.last_heartbeat_ms < created_ms_) n.last_heartbeat_ms = created_ms_;
    auto due = detector_.evaluate(n, now_ms);
    const bool held = due && (service_stalled_ || now_ms < grace_until_ms_) && due->to != NodeState::alive;
    if (!due || held) {
      if (fresh) beats.push_back(n);
      continue;
    }
    NodeTransition tr = std::move(*due);
    if (tr.to == NodeState::alive && h != heard.end()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "heartbeat resumed after %.1f s of silence", (h->second - recorded) / 1000.0);
      tr.reason = buf;
    }
    TROUPE_RETURN_IF_ERROR(apply(n, tr, now_ms, &report.actors_marked_dead).with_context("cluster manager tick"));
    n.state = tr.to;
    if (tr.to == NodeState::dead) n.death_reason = tr.reason;
    report.transitions.push_back(std::move(tr));
  }
  // The heartbeats taken since the last tick, in one round trip (the nodes' `troupe status` ages).
  if (!beats.empty()) {
    TROUPE_RETURN_IF_ERROR(gcs::Table<NodeRecord>(store_).put_many(beats).with_context(
        "cluster manager tick: recording " + std::to_string(beats.size()) + " heartbeats"));
  }
  {
    std::lock_guard<std::mutex> h(heard_mu_);
    for (const auto& n : nodes) remember(n);
    table_read_ = true;
  }
  for (const auto& n : nodes) {
    if (n.state == NodeState::dead && unswept_.count(n.id)) {
      TROUPE_RETURN_IF_ERROR(sweep_actors(n, now_ms, &report.actors_marked_dead).with_context("cluster manager tick"));
    }
  }
  report.next_tick_ms = now_ms + options_.heartbeat_period_ms;
  if (auto due = detector_.next_due_ms(nodes, now_ms)) report.next_tick_ms = std::min(report.next_tick_ms, *due);
  return report;
}

Status ClusterManager::apply(NodeRecord node, const NodeTransition& t, int64_t now_ms, int* actors_marked) {
  node.state = t.to;
  if (t.to == NodeState::dead) node.death_reason = t.reason;
  TROUPE_RETURN_IF_ERROR(gcs::Table<NodeRecord>(store_).put(node).with_context("writing " + label(node)));
  {
    std::lock_guard<std::mutex> heard(heard_mu_);
    remember(node);
  }
  if (t.to == NodeState::dead) unswept_.insert(node.id);  // from here on its actors must be swept

  std::string message = label(node) + " is " + node_state_text(t.to) + ": " + t.reason;
  // A dead node's actors are marked first and its own event comes after theirs, saying how many:
  // one actor_died per actor would otherwise bury the node's death below the newest events (the
  // dashboard's overview lists the last 10; a node may hold hundreds of actors). The event is
  // recorded even when the sweep fails (the next tick sweeps the rest).
  Status swept;
  if (t.to == NodeState::dead) {
    const int before = *actors_marked;
    swept = sweep_actors(node, now_ms, actors_marked);
    const int marked = *actors_marked - before;
    message = label(node) + " died: " + t.reason +
              (marked > 0 ? " (" + std::to_string(marked) + " actor" + (marked == 1 ? "" : "s") + " on it marked dead)"
                          : "");
  }
  if (t.to == NodeState::alive) spdlog::info("{}", message);
  else spdlog::warn("{}", message);
  TROUPE_RETURN_IF_ERROR(gcs::record_event(store_, {now_ms, event_kind(t.to), node.id.hex(), message})
                             .with_context("recording the event of " + label(node)));
  return swept;
}

Status ClusterManager::sweep_actors(const NodeRecord& node, int64_t now_ms, int* actors_marked) {
  gcs::Table<ActorRecord> actors(store_);
  auto listed = actors.list();
  if (!listed.ok()) return listed.status().with_context("marking the actors of " + label(node) + " dead");
  for (ActorRecord& a : *listed) {
    if (a.node != node.id || gcs::actor_ended(a.state)) continue;
    a.state = gcs::ActorState::dead;
    a.death_reason = label(node) + " died: " + node.death_reason;
    a.updated_ms = now_ms;
    TROUPE_RETURN_IF_ERROR(actors.put(a).with_context("marking actor " + a.id.short_hex() + " dead"));
    ++*actors_marked;
    const std::string who = "actor " + a.id.short_hex() + (a.type_name.empty() ? "" : " (" + a.type_name + ")");
    TROUPE_RETURN_IF_ERROR(gcs::record_event(store_, {now_ms, "actor_died", a.id.hex(), who + " died: " + a.death_reason})
                               .with_context("recording the death of " + who));
  }
  unswept_.erase(node.id);
  return {};
}

}  // namespace troupe::actors
