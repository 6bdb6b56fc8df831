#include "actors/head_service.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/blocking_request.h"
#include "actors/gpu_assignment.h"
#include "actors/job_submissions.h"
#include "actors/job_supervisor.h"
#include "actors/node_manager_client.h"
#include "actors/scheduler.h"
#include "actors/search_supervisor.h"
#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/send.hpp"
#include "caf/system_messages.hpp"
#include "gcs/events.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {

constexpr int kMaxSpawn = 100000;
constexpr std::chrono::milliseconds kLookupTimeout{2000};  // a node manager asked for a job's actor
constexpr int64_t kNodeTimeoutBackoffMs = 30000;  // a waiting spawn, after a node did not answer
using retry_atom = caf::atom_constant<caf::atom("retryjobs")>;
using watch_atom = caf::atom_constant<caf::atom("watchjobs")>;
using adopt_atom = caf::atom_constant<caf::atom("adoptjobs")>;
using search_atom = caf::atom_constant<caf::atom("searches")>;
using explain_atom = caf::atom_constant<caf::atom("explain")>;

class HeadService : public caf::event_based_actor {
 public:
  HeadService(caf::actor_config& cfg, HeadServiceOptions o) : caf::event_based_actor(cfg), o_(std::move(o)) {
    set_down_handler([this](caf::down_msg& msg) { on_down(msg); });
    if (o_.head_node_manager) managers_[o_.head_node] = o_.head_node_manager;
  }

  caf::behavior make_behavior() override {
    delayed_send(this, std::chrono::seconds(1), watch_atom::value);
    delayed_send(this, std::chrono::seconds(1), search_atom::value);
    return {
        [this](const RegisterNode& r) -> caf::result<RegisterReply> {
          auto reply = admit(r);
          if (!reply.ok()) return to_error(reply.status());
          return *reply;
        },
        [this](const Heartbeat& h) -> caf::result<HeartbeatAck> {
          auto id = NodeId::from_hex(h.node_id);
          if (!id.ok()) return to_error(id.status());
          // Nodes heartbeat to the heartbeat receiver; the head's own heartbeat comes here, every
          // tick, and shows the service takes messages (ClusterManagerOptions::self). It brings the
          // resources in use that the service counts to the cluster manager.
          o_.cluster->note_used(used_);
          Status st = o_.cluster->heartbeat(*id);
          // A refusal (declared DEAD, unknown) goes back to the node, which must stop. A GCS that is
          // down is the head's problem, not the node's: the node is alive, so it is acknowledged.
          if (st.code() == Code::invalid_argument || st.code() == Code::not_found) return to_error(st);
          if (!st.ok()) spdlog::warn("recording a heartbeat of node {}: {}", id->short_hex(), st.to_string());
          return HeartbeatAck{gcs::now_ms()};
        },
        [this](const SpawnActors& s) -> caf::result<SpawnActorsReply> {
          auto reply = spawn_actors(s);
          if (!reply.ok()) return to_error(reply.status());
          return *reply;
        },
        [this](const SubmitJob& s) -> caf::result<SubmitJobReply> {
          auto reply = jobs_.submit(s);
          if (!reply.ok()) return to_error(reply.status());
          schedule_retry();
          return *reply;
        },
        [this](const StopJob& s) -> caf::result<StopJobReply> {
          auto reply = jobs_.stop(s);
          if (!reply.ok()) return to_error(reply.status());
          return *reply;
        },
        [this](const ShutdownNodes& s) -> caf::result<ShutdownNodesReply> { return shutdown_nodes(s.reason); },
        [this](const StopActor& s) -> caf::result<StopActorReply> {
          auto reply = stop_spawned(s);
          if (!reply.ok()) return to_error(reply.status());
          return *reply;
        },
        [this](const NodeDeclaredDead& d) {
          auto id = NodeId::from_hex(d.node_id);
          if (id.ok()) node_dead(*id, d.reason);
        },
        [this](watch_atom) {  // stuck jobs, every second
          jobs_.check_progress();
          schedule_retry();
          delayed_send(this, std::chrono::seconds(1), watch_atom::value);
        },
        [this](search_atom) {  // hyperparameter searches, twice a second
          searches_.tick();
          delayed_send(this, std::chrono::milliseconds(500), search_atom::value);
        },
        [this](adopt_atom) { adopt_jobs(); },  // run_head, once the service is published
        [this](const GcsDataLost& lost) { after_gcs_lost(lost.what); },
        [this](explain_atom) {  // exits seen without their reason, every 100 ms while some are left
          explain_scheduled_ = false;
          jobs_.explain_exits();
          schedule_retry();
          schedule_explain();
        },
        [this](retry_atom) {
          retry_scheduled_ = false;
          retry_spawns();
          schedule_retry();
        },
    };
  }

 private:
  Expected<RegisterReply> admit(const RegisterNode& r) {
    auto id = NodeId::from_hex(r.node_id);
    if (!id.ok()) return id.status();
    gcs::NodeRecord n;
    n.id = *id;
    n.address = r.address;
    n.hostname = r.hostname;
    n.pid = r.pid;
    n.version = r.version;
    n.total = {r.cpus, r.gpus, r.memory_bytes};
    for (size_t i = 0; i < r.gpu_names.size(); ++i) {
      n.gpus.push_back({static_cast<int>(i), r.gpu_names[i],
                        i < r.gpu_memory_bytes.size() ? r.gpu_memory_bytes[i] : 0});
    }
    auto hp = parse_host_port(r.address);
    if (!hp.ok()) return hp.status().with_context("node " + r.node_id.substr(0, 8) + " address");
    // Reach the node's node manager before admitting it, so an admitted node is always monitored.
    auto nm = o_.system->connect(hp->first, hp->second);
    if (!nm.ok()) return nm.status().with_context("node " + r.node_id.substr(0, 8) + " registered, but its node manager");
    TROUPE_RETURN_IF_ERROR(o_.cluster->register_node(n, r.token, r.version));
    monitor(*nm);
    managers_[*id] = *nm;
    by_addr_[nm->address()] = *id;
    spdlog::info("node {} joined from {} ({} cpus, {} gpus)", r.node_id.substr(0, 8), r.address, r.cpus, r.gpus);
    RegisterReply reply = o_.gcs_info;
    reply.node_id = r.node_id;
    return reply;
  }

  // A head started on a GCS that an earlier head used: its nodes' resources in use (the actors alive
  // there), and the jobs it ran, supervised again (JobSupervisor::adopt). Nodes re-register by
  // themselves (actors/node_process.cc); their node managers are reached here at their recorded
  // addresses to look the live actors' handles up. Best effort: what cannot be read is logged.
  void adopt_jobs() {
    auto actors = gcs::Table<gcs::ActorRecord>(*o_.store).list();
    auto jobs = gcs::Table<gcs::JobRecord>(*o_.store).list();
    auto nodes = gcs::Table<gcs::NodeRecord>(*o_.store).list();
    if (!actors.ok() || !jobs.ok() || !nodes.ok()) {
      spdlog::error("head: reading the GCS to take over running jobs failed; jobs of an earlier head are not supervised");
      return;
    }
    std::map<ActorId, gcs::ActorRecord> by_id;
    for (const gcs::ActorRecord& a : *actors) {
      by_id[a.id] = a;
      if (a.state != gcs::ActorState::alive || a.node.nil()) continue;
      used_[a.node].cpus += a.resources.cpus;
      used_[a.node].gpus += a.resources.gpus;
    }
    std::map<NodeId, std::string> addresses;  // nodes not DEAD; one that cannot be reached is dropped
    for (const gcs::NodeRecord& n : *nodes)
      if (n.state != gcs::NodeState::dead) addresses[n.id] = n.address;
    int adopted = 0;
    for (const gcs::JobRecord& j : *jobs) {
      if (gcs::job_finished(j.state)) continue;
      auto submission = load_submission(*o_.store, j.id);
      if (!submission.ok()) {
        spdlog::warn("head: job {} is {} but cannot be supervised again: {}", j.id.short_hex(),
                     gcs::job_state_name(j.state), submission.status().to_string());
        continue;
      }
      int attempt = 0;
      std::vector<JobSupervisor::AdoptedMember> members;
      for (const std::string& hex : j.actors) {
        auto aid = ActorId::from_hex(hex);
        auto rec = aid.ok() ? by_id.find(*aid) : by_id.end();
        JobSupervisor::AdoptedMember m;
        if (rec == by_id.end()) {
          m.lost_reason = "no record of actor " + hex.substr(0, 8);
          members.push_back(m);
          continue;
        }
        m.id = rec->second.id;
        m.node = rec->second.node;
        attempt = std::max(attempt, rec->second.restarts);
        m.lost_reason = rec->second.state == gcs::ActorState::alive ? "" : rec->second.death_reason;
        if (rec->second.state == gcs::ActorState::alive) {
          auto handle = lookup_actor(m.node, m.id, addresses);
          if (handle.ok()) m.handle = *handle;
          else m.lost_reason = handle.status().message();
        }
        members.push_back(m);
      }
      jobs_.adopt(*submission, attempt, members);
      ++adopted;
    }
    if (adopted > 0) spdlog::info("head: supervising {} job(s) an earlier head started", adopted);
    adopt_spawned(*actors, addresses);
    schedule_retry();
  }

  // The GCS lost its data (gcs/gcs_stamp.h): every live actor of every connected node manager is
  // recorded ALIVE again — with its job, demand and restarts as the job supervisor knows them, or
  // its demand as a `troupe spawn` actor — and the jobs are handled by the supervisor (running ones
  // restart from their checkpoints on disk or fail naming the loss). Spawns still waiting are
  // recorded again when next placed.
  void after_gcs_lost(const std::string& what) {
    std::vector<gcs::ActorRecord> records;
    const int64_t now = gcs::now_ms();
    int asked = 0;
    for (const auto& [node, nm] : managers_) {
      auto listed = NodeManagerClient(system(), nm, kLookupTimeout).list();
      if (!listed.ok()) {
        spdlog::warn("head: listing the actors of node {} after the GCS lost its data: {}", node.short_hex(),
                     listed.status().to_string());
        continue;
      }
      ++asked;
      for (const LiveActor& a : *listed) {
        auto id = ActorId::from_hex(a.actor_id);
        if (!id.ok()) continue;
        gcs::ActorRecord r;
        r.id = *id;
        r.type_name = a.type_name;
        r.name = a.actor_name;
        r.node = node;
        r.gpu_ids.assign(a.gpu_ids.begin(), a.gpu_ids.end());
        r.state = gcs::ActorState::alive;
        r.updated_ms = now;
        if (auto sp = spawned_.find(a.handle.address()); sp != spawned_.end()) r.resources = sp->second.second;
        jobs_.fill_member_record(r.id, &r);
        records.push_back(std::move(r));
      }
    }
    Status st = gcs::Table<gcs::ActorRecord>(*o_.store).put_many(records);
    if (st.ok()) {
      st = gcs::record_event(*o_.store, {now, "gcs_refilled", "",
                                          std::to_string(records.size()) + " live actor records written again from " +
                                              std::to_string(asked) + " node managers"});
    }
    if (!st.ok()) spdlog::error("head: writing the actors back after the GCS lost its data: {}", st.to_string());
    jobs_.on_gcs_lost(what);
    searches_.on_gcs_lost();
    schedule_retry();
  }

  // The `troupe spawn` actors an earlier head left ALIVE: monitored again, so their resources go
  // back when they exit (as if this head had spawned them). One its node no longer has (it exited
  // while no head watched; its node's DEAD report was lost with the old head) is recorded DEAD and
  // its resources given back; one on a node that cannot be reached is left to the failure detector.
  // Those it left PENDING (waiting for resources) cannot be placed again — their arguments were
  // the old head's only — so they are recorded DEAD, saying to spawn them again.
  void adopt_spawned(const std::vector<gcs::ActorRecord>& actors, std::map<NodeId, std::string>& addresses) {
    int watched = 0, gone = 0;
    std::set<NodeId> slow;  // a node whose manager did not answer a lookup in time: not asked again
    gcs::Table<gcs::ActorRecord> table(*o_.store);
    for (const gcs::ActorRecord& a : actors) {
      if (a.state == gcs::ActorState::pending && a.job.nil() && a.updated_ms < started_ms_) {
        gone += record_dead(table, a.id, gcs::ActorState::pending,
                            "never placed: the head that was placing it stopped (" + a.pending_reason +
                                "); spawn it again");
        continue;
      }
      if (a.state != gcs::ActorState::alive || a.node.nil() || !a.job.nil() || slow.count(a.node)) continue;
      auto handle = lookup_actor(a.node, a.id, addresses);
      if (handle.ok()) {
        monitor(*handle);
        spawned_[handle->address()] = {a.node, a.resources};
        ++watched;
        continue;
      }
      if (handle.status().code() == Code::timeout) slow.insert(a.node);
      if (handle.status().code() != Code::not_found || !managers_.count(a.node)) continue;  // the node's fate decides
      release(a.node, a.resources);
      gone += record_dead(table, a.id, gcs::ActorState::alive,
                          "exited while no head watched it (found missing by the restarted head)");
    }
    if (watched + gone > 0)
      spdlog::info("head: watching {} spawned actor(s) an earlier head started ({} found gone or never placed)",
                   watched, gone);
  }

  // Actor `id` recorded DEAD with `reason` (1), unless its record is no longer in state `was` (0):
  // its node may have recorded it DEAD meanwhile, with the real reason.
  int record_dead(gcs::Table<gcs::ActorRecord>& table, const ActorId& id, gcs::ActorState was,
                  const std::string& reason) {
    auto rec = table.get(id.hex());
    if (!rec.ok() || rec->state != was) return 0;
    rec->state = gcs::ActorState::dead;
    rec->death_reason = reason;
    rec->pending_reason.clear();
    rec->updated_ms = gcs::now_ms();
    Status st = table.put(*rec);
    if (!st.ok()) spdlog::warn("head: recording actor {} DEAD: {}", id.short_hex(), st.to_string());
    return st.ok() ? 1 : 0;
  }

  // The live actor `id` on `node`, asked of its node manager (connected here and kept for stops;
  // a node that cannot be reached is dropped from `addresses`, so it costs one timeout, not one per actor).
  Expected<caf::actor> lookup_actor(const NodeId& node, const ActorId& id, std::map<NodeId, std::string>& addresses) {
    auto nm = managers_.find(node);
    if (nm == managers_.end()) {
      auto address = addresses.find(node);
      if (address == addresses.end()) return not_found("its node " + node.short_hex() + " is gone or unreachable");
      auto hp = parse_host_port(address->second);
      if (!hp.ok()) return hp.status();
      auto connected = o_.system->connect(hp->first, hp->second, kLookupTimeout);
      if (!connected.ok()) {
        addresses.erase(address);
        return connected.status().with_context("its node " + node.short_hex() + "'s node manager");
      }
      nm = managers_.emplace(node, *connected).first;
    }
    auto found = NodeManagerClient(system(), nm->second, kLookupTimeout).lookup(id);
    if (!found.ok()) return found.status();
    return found->handle;
  }

  // While jobs or spawned actors wait for resources, retry their placement every second; while a
  // job waits to be restarted, every 50 ms (its backoff decides when).
  void schedule_retry() {
    if (retry_scheduled_ || (!jobs_.retry_pending() && pending_spawns_.empty())) return;
    retry_scheduled_ = true;
    delayed_send(this, jobs_.restarting() ? std::chrono::milliseconds(50) : std::chrono::milliseconds(1000),
                 retry_atom::value);
  }

  // The job supervisor's exits that came without their reason (JobSupervisor::explain_exits).
  void schedule_explain() {
    if (explain_scheduled_ || !jobs_.unexplained_exits()) return;
    explain_scheduled_ = true;
    delayed_send(this, std::chrono::milliseconds(100), explain_atom::value);
  }

  void on_down(const caf::down_msg& msg) {
    if (jobs_.on_down(msg.source, msg.reason, msg.reason ? to_status(system(), msg.reason, "exited").message() : "")) {
      schedule_retry();
      schedule_explain();
      return;
    }
    if (auto spawned = spawned_.find(msg.source); spawned != spawned_.end()) {
      release(spawned->second.first, spawned->second.second);
      spawned_.erase(spawned);
      return;
    }
    auto it = by_addr_.find(msg.source);
    if (it == by_addr_.end()) return;
    const NodeId id = it->second;
    by_addr_.erase(it);
    managers_.erase(id);
    spdlog::warn("connection to node {} lost", id.short_hex());
    Status st = o_.cluster->on_connection_lost(id);
    if (!st.ok()) spdlog::error("marking node {} dead: {}", id.short_hex(), st.to_string());
    node_dead(id, "its connection to the head dropped");
  }

  void node_dead(const NodeId& id, const std::string& reason) {
    // Requests to its node manager would only wait for their deadline now.
    if (auto nm = managers_.find(id); nm != managers_.end()) {
      by_addr_.erase(nm->second.address());
      managers_.erase(nm);
    }
    jobs_.on_node_dead(id, reason);
    schedule_retry();
  }

  Expected<SpawnActorsReply> spawn_actors(const SpawnActors& s) {
    if (s.type_name.empty()) return invalid_argument("spawn: no actor type given");
    if (s.count < 1 || s.count > kMaxSpawn) {
      return invalid_argument("spawn: count " + std::to_string(s.count) + " must be in [1, " +
                              std::to_string(kMaxSpawn) + "]");
    }
    // Refused here, not by each node: 1.5 GPUs fits the head's count but no node's devices.
    TROUPE_RETURN_IF_ERROR(check_gpu_demand(s.gpus, "--gpus").with_context("spawn"));
    std::optional<NodeId> pinned;
    if (!s.node_id.empty()) {
      auto node = NodeId::from_hex(s.node_id);
      if (!node.ok()) return node.status();
      pinned = *node;
    }
    std::vector<PlacementAsk> asks(static_cast<size_t>(s.count));
    for (size_t i = 0; i < asks.size(); ++i) {
      asks[i].id = ActorId::random();
      asks[i].actor = JobActor{s.type_name, s.name_prefix.empty() ? "" : s.name_prefix + std::to_string(i), s.cpus,
                               s.gpus, s.args};
    }
    SpawnActorsReply reply;
    PendingSpawn spawn{std::move(asks), s.gang, s.policy, pinned};
    auto placed = place(spawn.asks, spawn.gang, spawn.policy, pinned, JobId(), &reply);
    if (!placed.ok()) return placed.status();
    started_spawned(*placed, spawn);
    schedule_retry();
    spdlog::info("spawned {} of {} '{}' actors", reply.started, s.count, s.type_name);
    return reply;
  }

  // Places `asks` (a gang when `gang` is set), records them PENDING or ALIVE, and starts the placed
  // ones through their nodes' node managers (one batch per node). `reply` gets the counts and the
  // reasons; the outcome says whether every actor started, with handles and nodes.
  Expected<PlacementOutcome> place(const std::vector<PlacementAsk>& asks, const std::string& gang,
                                   const std::string& policy_name, const std::optional<NodeId>& pinned,
                                   const JobId& job, SpawnActorsReply* reply) {
    auto policy = parse_placement_policy(policy_name.empty() ? o_.default_policy : policy_name);
    if (!policy.ok()) return policy.status();
    auto nodes = gcs::Table<gcs::NodeRecord>(*o_.store).list();
    if (!nodes.ok()) return nodes.status();
    std::vector<NodeView> views = placement_views(*nodes);  // the head's own usage is the freshest

    std::vector<PlacementRequest> requests(asks.size());
    std::vector<gcs::ActorRecord> records(asks.size());
    std::map<ActorId, size_t> index;
    const int64_t now = gcs::now_ms();
    for (size_t i = 0; i < asks.size(); ++i) {
      const JobActor& a = asks[i].actor;
      requests[i].actor = asks[i].id;
      requests[i].demand = {a.cpus, a.gpus, 0};
      requests[i].pinned_node = asks[i].pin ? asks[i].pin : pinned;
      requests[i].avoid_node = asks[i].avoid;
      requests[i].group = gang;
      gcs::ActorRecord& r = records[i];
      r.id = asks[i].id;
      r.type_name = a.type_name;
      r.name = a.name;
      r.job = job;
      r.resources = requests[i].demand;
      r.state = gcs::ActorState::pending;
      r.pending_reason = "being placed";
      r.updated_ms = now;
      index[r.id] = i;
      reply->actor_ids.push_back(r.id.hex());
    }
    auto result = Scheduler({*policy}).schedule(views, requests);
    if (!result.ok()) return result.status();

    PlacementOutcome outcome;
    std::map<std::string, int> reasons;
    for (const Unplaced& u : result->pending) {
      records[index[u.actor]].pending_reason = u.reason;
      ++reasons[u.reason];
      if (outcome.pending_reason.empty()) outcome.pending_reason = u.reason;
    }
    TROUPE_RETURN_IF_ERROR(gcs::Table<gcs::ActorRecord>(*o_.store).put_many(records));

    // One batched spawn per node; the node's ActorStateWriter records them ALIVE.
    std::map<NodeId, std::vector<SpawnRequest>> per_node;
    for (const Placement& p : result->placements) {
      const JobActor& a = asks[index[p.actor]].actor;
      SpawnRequest req = spawn_request(a.type_name, a.name, a.args);
      req.actor_id = p.actor.hex();
      req.gpus = a.gpus;  // the node manager picks the devices
      per_node[p.node].push_back(std::move(req));
    }
    for (auto& [node, reqs] : per_node) {
      auto nm = managers_.find(node);
      Expected<std::vector<SpawnReply>> spawned =
          nm == managers_.end() ? Expected<std::vector<SpawnReply>>(
                                      unavailable("node " + node.short_hex() + " has no connected node manager"))
                                : NodeManagerClient(system(), nm->second, o_.node_timeout).spawn_batch(reqs);
      if (spawned.ok()) {
        reply->started += static_cast<int32_t>(reqs.size());
        for (const SpawnReply& sr : *spawned) {
          auto aid = ActorId::from_hex(sr.actor_id);
          if (!aid.ok()) continue;
          const JobActor& a = asks[index[*aid]].actor;
          used_[node].cpus += a.cpus;
          used_[node].gpus += a.gpus;
          outcome.handles[*aid] = sr.handle;
          outcome.nodes[*aid] = node;
        }
        TROUPE_RETURN_IF_ERROR(record_started(*spawned, node, records, index, reqs.front().type_name));
        continue;
      }
      const std::string why = "starting on node " + node.short_hex() + " failed: " + spawned.status().message();
      outcome.node_failures.push_back(spawned.status());
      ++reasons[why];
      if (outcome.pending_reason.empty()) outcome.pending_reason = why;
      std::vector<gcs::ActorRecord> failed;
      for (const SpawnRequest& req : reqs) {
        gcs::ActorRecord r = records[index[*ActorId::from_hex(req.actor_id)]];
        r.pending_reason = why;
        failed.push_back(r);
      }
      TROUPE_RETURN_IF_ERROR(gcs::Table<gcs::ActorRecord>(*o_.store).put_many(failed));
    }
    for (const auto& [reason, count] : reasons) {
      reply->pending_reasons.push_back(std::to_string(count) + " actor(s): " + reason);
    }
    outcome.started = reply->started == static_cast<int32_t>(asks.size());
    return outcome;
  }

  // The actors a node started, ALIVE in one write with the GPUs their node gave them, and one
  // actor_started event for the batch. One that already ended (its node wrote it FINISHED or DEAD,
  // with its reason, before this write) keeps that record: the job supervisor reads the reason there.
  Status record_started(const std::vector<SpawnReply>& started, const NodeId& node,
                        const std::vector<gcs::ActorRecord>& records, std::map<ActorId, size_t>& index,
                        const std::string& type) {
    gcs::Table<gcs::ActorRecord> table(*o_.store);
    std::vector<std::string> keys;
    for (const SpawnReply& sr : started) keys.push_back(sr.actor_id);
    std::map<std::string, gcs::ActorRecord> ended;
    auto existing = table.get_many(keys);
    if (existing.ok()) {
      for (const gcs::ActorRecord& r : *existing)
        if (gcs::actor_ended(r.state)) ended.emplace(r.id.hex(), r);
    }
    std::vector<gcs::ActorRecord> written;
    written.reserve(started.size());
    const int64_t now = gcs::now_ms();
    for (const SpawnReply& sr : started) {
      auto id = ActorId::from_hex(sr.actor_id);
      if (!id.ok() || !index.count(*id)) continue;  // not one of ours: the node answered oddly
      gcs::ActorRecord r = records[index[*id]];
      r.node = node;
      r.gpu_ids.assign(sr.gpu_ids.begin(), sr.gpu_ids.end());
      r.state = gcs::ActorState::alive;
      r.pending_reason.clear();
      r.updated_ms = now;
      if (auto dead = ended.find(sr.actor_id); dead != ended.end()) {  // what the head knows, and the end
        r.state = dead->second.state;
        r.death_reason = dead->second.death_reason;
        r.updated_ms = dead->second.updated_ms;
      }
      written.push_back(std::move(r));
    }
    TROUPE_RETURN_IF_ERROR(table.put_many(written));
    gcs::Event e;
    e.kind = "actor_started";
    e.subject = node.hex();
    e.message = "started " + std::to_string(started.size()) + " '" + type + "' actor" +
                (started.size() == 1 ? "" : "s") + " on node " + node.short_hex() +
                (started.size() == 1 ? " (" + started[0].actor_id.substr(0, 8) + ")" : "");
    return gcs::record_event(*o_.store, e);
  }

  // A `troupe spawn` whose actors (some, or its whole gang) wait for resources: placed again every
  // second until they start or are stopped, like a job's.
  struct PendingSpawn {
    std::vector<PlacementAsk> asks;
    std::string gang, policy;
    std::optional<NodeId> pinned;
    int64_t retry_at_ms = 0;
  };

  // The actors `placed` started are monitored (their resources go back to the head's accounting
  // when they exit; a job's are the job supervisor's) and leave `spawn`; what is left waits, unless
  // a node refused it for good (an unknown type, a factory's error: its PENDING record keeps the
  // reason). After a node that did not answer, the next try waits kNodeTimeoutBackoffMs: placement
  // calls block the head service (up to its node timeout), and the failure detector should have
  // its say about that node first.
  void started_spawned(PlacementOutcome& placed, PendingSpawn& spawn) {
    for (const auto& [aid, handle] : placed.handles) {
      monitor(handle);
      const JobActor& a = spawn.asks.front().actor;  // one spawn: every ask has the same demand
      spawned_[handle.address()] = {placed.nodes[aid], {a.cpus, a.gpus, 0}};
    }
    auto gone = [&](const PlacementAsk& a) { return placed.handles.count(a.id) != 0 || placed.undone; };
    spawn.asks.erase(std::remove_if(spawn.asks.begin(), spawn.asks.end(), gone), spawn.asks.end());
    if (spawn.asks.empty()) return;
    bool timed_out = false;
    for (const Status& st : placed.node_failures) {
      if (st.code() == Code::timeout) {
        timed_out = true;
      } else if (st.code() != Code::unavailable) {
        spdlog::warn("{} '{}' actors stay PENDING, not tried again: {}", spawn.asks.size(),
                     spawn.asks.front().actor.type_name, st.to_string());
        return;
      }
    }
    spawn.retry_at_ms = gcs::now_ms() + (timed_out ? kNodeTimeoutBackoffMs : 1000);
    pending_spawns_.push_back(std::move(spawn));
  }

  void retry_spawns() {
    const int64_t now = gcs::now_ms();
    std::vector<PendingSpawn> waiting;
    waiting.swap(pending_spawns_);
    for (PendingSpawn& spawn : waiting) {
      if (now < spawn.retry_at_ms) {
        pending_spawns_.push_back(std::move(spawn));
        continue;
      }
      SpawnActorsReply reply;
      auto placed = place(spawn.asks, spawn.gang, spawn.policy, spawn.pinned, JobId(), &reply);
      if (!placed.ok()) {
        spdlog::warn("placing {} waiting '{}' actors: {}", spawn.asks.size(), spawn.asks.front().actor.type_name,
                     placed.status().to_string());
        pending_spawns_.push_back(std::move(spawn));
        continue;
      }
      if (reply.started > 0) spdlog::info("started {} '{}' actors that were waiting for resources", reply.started,
                                          spawn.asks.front().actor.type_name);
      started_spawned(*placed, spawn);
    }
  }

  // `troupe down`: every node but the head's own asked to shut down through its node manager (a node
  // on another host included); the processes then exit and their connections dropping mark them DEAD.
  ShutdownNodesReply shutdown_nodes(const std::string& reason) {
    ShutdownNodesReply reply;
    gcs::Table<gcs::NodeRecord> nodes(*o_.store);
    size_t failed = 0;
    for (const auto& [node, nm] : managers_) {
      if (node == o_.head_node) continue;
      NodeShutdown n;
      n.node_id = node.hex();
      if (auto rec = nodes.get(node.hex()); rec.ok()) {
        n.hostname = rec->hostname;
        n.address = rec->address;
        n.pid = rec->pid;  // what `down` kills over ssh when the node does not answer here
      }
      auto done = request_blocking<ShutdownNodeReply>(system(), nm, std::chrono::seconds(3), ShutdownNode{reason},
                                                      "asking node " + node.short_hex() + " to shut down");
      if (done.ok()) {
        n.pid = done->pid;
      } else {
        n.error = done.status().message();
        ++failed;
      }
      reply.nodes.push_back(std::move(n));
    }
    spdlog::info("head: asked {} node(s) to shut down ({}); {} did not answer", reply.nodes.size(), reason, failed);
    return reply;
  }

  // `troupe stop ACTOR`: an ALIVE actor of no job, stopped through its node (which records it FINISHED;
  // its down message gives its resources back here).
  Expected<StopActorReply> stop_spawned(const StopActor& s) {
    auto id = ActorId::from_hex(s.actor_id);
    if (!id.ok()) return id.status().with_context("stop actor");
    auto rec = gcs::Table<gcs::ActorRecord>(*o_.store).get(id->hex());
    if (!rec.ok()) return rec.status().with_context("stop actor " + id->short_hex());
    if (!rec->job.nil()) {
      return invalid_argument("actor " + id->short_hex() + " is part of job " + rec->job.short_hex() +
                                 ": stop the job (troupe stop " + rec->job.short_hex() + ")");
    }
    if (rec->state == gcs::ActorState::pending && forget_pending_spawn(*id)) {
      rec->state = gcs::ActorState::dead;
      rec->pending_reason.clear();
      rec->death_reason = "stopped before it was placed: " + (s.reason.empty() ? "stopped by troupe stop" : s.reason);
      rec->updated_ms = gcs::now_ms();
      TROUPE_RETURN_IF_ERROR(gcs::Table<gcs::ActorRecord>(*o_.store).put(*rec));
      return StopActorReply{""};
    }
    if (rec->state != gcs::ActorState::alive)
      return not_found("actor " + id->short_hex() + " is " + gcs::actor_state_name(rec->state) + ", not ALIVE");
    TROUPE_RETURN_IF_ERROR(stop_actor(rec->node, *id, s.reason.empty() ? "stopped by troupe stop" : s.reason));
    return StopActorReply{rec->node.hex()};
  }

  // Drops `id` from the spawns waiting for resources (a gang's other members go on waiting: the
  // gang is what is left of it). False when it is not waiting.
  bool forget_pending_spawn(const ActorId& id) {
    for (PendingSpawn& spawn : pending_spawns_) {
      auto it = std::find_if(spawn.asks.begin(), spawn.asks.end(), [&](const PlacementAsk& a) { return a.id == id; });
      if (it == spawn.asks.end()) continue;
      spawn.asks.erase(it);
      pending_spawns_.erase(std::remove_if(pending_spawns_.begin(), pending_spawns_.end(),
                                           [](const PendingSpawn& p) { return p.asks.empty(); }),
                            pending_spawns_.end());
      return true;
    }
    return false;
  }

  // Asks `node`'s manager to stop actor `id`. Not waited for: a node killed a moment ago (its
  // connection loss still queued here) would hold the head — and every node's heartbeat with it —
  // for the whole timeout.
  Status stop_actor(const NodeId& node, const ActorId& id, const std::string& reason) {
    auto nm = managers_.find(node);
    if (nm == managers_.end()) return not_found("node " + node.short_hex() + " is not connected");
    request(nm->second, o_.node_timeout, StopRequest{id.hex(), reason})
        .then([](const StopReply&) {},
              [this, node, id](caf::error& err) {
                Status st = to_status(system(), err, "stopping actor " + id.short_hex());
                if (st.code() != Code::not_found)
                  spdlog::warn("stopping actor {} on node {}: {}", id.short_hex(), node.short_hex(), st.to_string());
              });
    return {};
  }

  // Gives `r` back to `node` in the head's accounting of resources in use.
  void release(const NodeId& node, const gcs::Resources& r) {
    gcs::Resources& u = used_[node];
    u.cpus = std::max(0.0, u.cpus - r.cpus);
    u.gpus = std::max(0.0, u.gpus - r.gpus);
  }

  // A gang starts whole or not at all: when some of its nodes started their part and another
  // failed (a node that died a moment ago), the started actors are stopped, their resources given
  // back and their records ended, and the outcome says so (`undone`: the gang is asked again under
  // new ids, so a late DEAD report of these never lands on a new actor's record).
  void undo_partial_gang(PlacementOutcome& out, const std::vector<PlacementAsk>& asks) {
    const std::string why = "stopped: the rest of its gang could not start (" + out.pending_reason + ")";
    std::vector<gcs::ActorRecord> ended;
    for (const PlacementAsk& a : asks) {
      auto node = out.nodes.find(a.id);
      if (node == out.nodes.end()) continue;
      Status st = stop_actor(node->second, a.id, why);
      if (!st.ok()) spdlog::warn("undoing a partly started gang: {}", st.to_string());
      gcs::ActorRecord r;
      r.id = a.id;
      r.type_name = a.actor.type_name;
      r.name = a.actor.name;
      r.node = node->second;
      r.resources = {a.actor.cpus, a.actor.gpus, 0};
      release(node->second, r.resources);
      r.state = gcs::ActorState::dead;
      r.death_reason = why;
      r.updated_ms = gcs::now_ms();
      ended.push_back(std::move(r));
    }
    spdlog::warn("a gang started only in part ({} of {} actors); stopped them: {}", ended.size(), asks.size(),
                 out.pending_reason);
    Status st = gcs::Table<gcs::ActorRecord>(*o_.store).put_many(ended);
    if (!st.ok()) spdlog::warn("recording the stopped part of a gang: {}", st.to_string());
    out.handles.clear();
    out.nodes.clear();
    out.undone = true;
  }

  // The scheduler's view of the nodes: the GCS's records with the head's own usage, and a node
  // without a connected node manager (an earlier head's node that has not re-registered, or one
  // whose connection just dropped) not ALIVE here, since nothing can be started on it.
  std::vector<NodeView> placement_views(const std::vector<gcs::NodeRecord>& nodes) {
    std::vector<NodeView> views = node_views(nodes);
    for (NodeView& v : views) {
      v.used = used_[v.id];
      if (v.state == gcs::NodeState::alive && !managers_.count(v.id)) v.state = gcs::NodeState::suspect;
    }
    return views;
  }

  // Whether `asks` would be placed now as one gang (the scheduler's dry run over the head's usage).
  bool fits(const std::vector<PlacementAsk>& asks, const std::string& policy_name) {
    auto policy = parse_placement_policy(policy_name.empty() ? o_.default_policy : policy_name);
    auto nodes = gcs::Table<gcs::NodeRecord>(*o_.store).list();
    if (!policy.ok() || !nodes.ok()) return false;
    std::vector<NodeView> views = placement_views(*nodes);
    std::vector<PlacementRequest> requests(asks.size());
    for (size_t i = 0; i < asks.size(); ++i) {
      requests[i].actor = asks[i].id;
      requests[i].demand = {asks[i].actor.cpus, asks[i].actor.gpus, 0};
      requests[i].group = "fits-probe";
    }
    auto result = Scheduler({*policy}).schedule(views, requests);
    return result.ok() && result->pending.empty();
  }

  JobHost job_host() {
    JobHost h;
    h.store = o_.store;
    h.place = [this](const std::vector<PlacementAsk>& asks, const std::string& gang, const std::string& policy,
                     const JobId& job) -> Expected<PlacementOutcome> {
      SpawnActorsReply ignored;
      auto out = place(asks, gang, policy, std::nullopt, job, &ignored);
      if (out.ok() && !out->started && !out->handles.empty()) undo_partial_gang(*out, asks);
      return out;
    };
    h.monitor = [this](const caf::actor& a) { monitor(a); };
    h.stop = [this](const NodeId& node, const ActorId& id, const std::string& reason) -> Status {
      return stop_actor(node, id, reason);
    };
    h.release = [this](const NodeId& node, const gcs::Resources& r) { release(node, r); };
    h.fits = [this](const std::vector<PlacementAsk>& asks, const std::string& policy) { return fits(asks, policy); };
    return h;
  }

  HeadServiceOptions o_;
  const int64_t started_ms_ = gcs::now_ms();  // records older than this are an earlier head's
  JobSupervisor jobs_{job_host()};
  SearchSupervisor searches_{*o_.store, trial_host(*o_.store, jobs_, [this] { schedule_retry(); })};
  bool retry_scheduled_ = false;
  bool explain_scheduled_ = false;
  std::map<NodeId, caf::actor> managers_;
  std::map<caf::actor_addr, NodeId> by_addr_;
  std::map<caf::actor_addr, std::pair<NodeId, gcs::Resources>> spawned_;  // live `troupe spawn` actors
  std::vector<PendingSpawn> pending_spawns_;                               // and those still waiting
  std::map<NodeId, gcs::Resources> used_;
};

}  // namespace

caf::actor spawn_head_service(caf::actor_system& sys, HeadServiceOptions options) {
  return sys.spawn<HeadService, caf::detached>(std::move(options));
}

void adopt_earlier_jobs(const caf::actor& service) { caf::anon_send(service, adopt_atom::value); }

}  // namespace troupe::actors
