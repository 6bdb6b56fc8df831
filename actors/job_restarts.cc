// The job supervisor's restarts (declared in actors/job_supervisor.h): what happens when one of a
// job's actors exits, and how a failed attempt is replaced.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "actors/job_supervisor.h"
#include "gcs/async_accounting.h"
#include "gcs/data_accounting.h"
#include "gcs/predict_accounting.h"
#include "gcs/events.h"
#include "gcs/job_recovery.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {

constexpr int64_t kMaxBackoffMs = 30000;
// How long a restarting gang waits for the failed attempt's actors to exit before it leaves the
// stragglers behind (their resources counted free; their late exits ignored).
constexpr int64_t kStopGraceMs = 1000;

int64_t backoff_for(int64_t base_ms, int attempt) {
  int64_t ms = base_ms;
  for (int i = 1; i < attempt && ms < kMaxBackoffMs; ++i) ms *= 2;
  return std::min(ms, kMaxBackoffMs);
}

// The job's message while it recovers (its state stays RUNNING); best effort.
void note(gcs::Store& store, const JobId& job, const std::string& message) {
  auto rec = gcs::update_job(store, job, [&](gcs::JobRecord& j) -> Status {
    if (gcs::job_finished(j.state)) return invalid_argument("ended");
    j.message = message;
    return {};
  });
  if (!rec.ok() && rec.status().code() != Code::invalid_argument)
    spdlog::warn("job {}: recording '{}': {}", job.short_hex(), message, rec.status().to_string());
}

}  // namespace

void count_restarts(gcs::Store& store, const ActorId& id, int restarts) {
  gcs::Table<gcs::ActorRecord> actors(store);
  auto rec = actors.get(id.hex());
  if (!rec.ok()) return;  // the node may not have recorded it yet; the count is information
  rec->restarts = restarts;
  Status st = actors.put(*rec);
  if (!st.ok()) spdlog::warn("recording the restarts of actor {}: {}", id.short_hex(), st.to_string());
}

PlacementAsk JobSupervisor::make_ask(const Job& job, size_t slot, const ActorId& id) const {
  PlacementAsk ask{id.nil() ? ActorId::random() : id, job.actors[slot], std::nullopt, std::nullopt};
  // Names are unique per node, and an actor of the failed attempt may still hold its name there
  // (stopped, but hung in a collective): a restart's actors carry their attempt in the name.
  if (job.attempt > 0 && !ask.actor.name.empty()) ask.actor.name += "-a" + std::to_string(job.attempt);
  // A job actor learns its attempt from its second-to-last argument and its own id from its last;
  // an elastic job's worker the gang's current size from the one before them.
  if (job.elastic) ask.actor.args.push_back(std::to_string(job.size));
  ask.actor.args.push_back(std::to_string(job.attempt));
  ask.actor.args.push_back(ask.id.hex());
  if (auto p = job.pins.find(slot); p != job.pins.end() && !dead_nodes_.count(p->second)) ask.pin = p->second;
  if (auto a = job.avoids.find(slot); a != job.avoids.end()) ask.avoid = a->second;
  return ask;
}

void JobSupervisor::member_exited(Job& job, Member& member, bool failed, const std::string& why) {
  member.running = false;
  host_.release(member.node, {member.actor.cpus, member.actor.gpus, 0});
  if (failed) members_failed(job, {&member}, why);
  after_exit(job);
}

namespace {
// "worker-0 (actor .. on node ..) and ps-1 (actor .. on node ..)"
template <typename Members>
std::string describe_members(const Members& failed) {
  std::string out;
  for (size_t i = 0; i < failed.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == failed.size() ? " and " : ", ") +
           describe_member(failed[i]->actor, failed[i]->id, failed[i]->node);
  }
  return out;
}
}  // namespace

void JobSupervisor::members_failed(Job& job, const Failed& given, const std::string& why) {
  if (job.ending || job.restarting || given.empty()) return;
  // A job whose rank 0 recorded its success: an actor failing now (a replacement or newcomer placed
  // as the job ended, waiting for peers that are gone) is no failure of the job; nothing restarts.
  if (auto rec = gcs::Table<gcs::JobRecord>(*host_.store).get(job.id.hex());
      rec.ok() && rec->state == gcs::JobState::succeeded) {
    spdlog::info("job {}: {} failed after the job succeeded ({}): nothing to restart", job.id.short_hex(),
                 describe_members(given), why);
    return;
  }
  // Servers first: an async job's replacements are placed in this order, and its workers wait for
  // the servers they cannot reach.
  Failed failed = given;
  std::stable_partition(failed.begin(), failed.end(), [](const Member* m) { return is_server_actor(m->actor); });
  const std::string cause = describe_members(failed) + " failed: " + why;
  spdlog::warn("job {}: {}", job.id.short_hex(), cause);
  const bool lost_a_server = is_server_actor(failed.front()->actor);  // servers come first
  if (!job.whole_gang && !job.replace.empty() && (!lost_a_server || job.restore_servers)) {
    // The job has not recovered from the last failure yet (replacements still to be placed): the
    // same fault reaching it again (two nodes killed together are declared dead one by one), not a
    // new failure. These slots join that restart; the budget is not charged twice.
    join_restart(job, failed, cause);
  } else if (!job.whole_gang && lost_a_server && !job.restore_servers) {
    // Without checkpoints an async job's server holds the only copy of its parameter shard: a new
    // one would start from the initial parameters.
    end_job(job, gcs::JobState::failed,
            cause + "; an async job's parameter server cannot be restored without checkpoints (its shard has "
                    "no copy): submit with --checkpoint-every N --checkpoint-dir DIR to have it restored");
  } else if (restarts_left(job)) {
    begin_restart(job, failed, cause, job.whole_gang);
  } else {
    end_job(job, gcs::JobState::failed,
            cause + (job.max_restarts > 0 ? "; no restarts left (all " + std::to_string(job.max_restarts) + " used)" : ""));
  }
}

void JobSupervisor::after_exit(Job& job) {
  bool workers_left = false, anyone_left = false;
  for (const Member& m : job.members) {
    anyone_left = anyone_left || m.running;
    workers_left = workers_left || (m.running && !is_server_actor(m.actor));
  }
  bool workers_coming = false;
  for (size_t slot : job.replace) workers_coming = workers_coming || !is_server_actor(job.actors[slot]);
  if (job.restarting) {
    if (!anyone_left) place_gang_again(job);
    return;
  }
  if (!workers_left && !workers_coming && anyone_left && !job.ending) {
    // A parameter-server job's workers are done (rank 0 recorded the result before it returned):
    // its accounting, before the servers are stopped.
    after_success(job);
    job.ending = true;
    stop_members(job, "the job's workers are done", true);
  }
  if (!anyone_left && (job.replace.empty() || job.ending)) {
    // Every actor ended normally: rank 0 recorded SUCCEEDED before it returned, unless it could not.
    if (!job.ending) {
      after_success(job);
      end_job(job, gcs::JobState::failed, "every worker exited, but none recorded a result");
    }
    forget_job(job.id, "its job ended");  // `job` is gone from here on
  }
}

// Where a restart's actors go (SubmitJob::restart_on): "same" pins each restarted slot to the node
// it ran on (unless that node is gone: then anywhere), "other" keeps the failed actors off their
// nodes. Returns the words for the job_restarting event.
std::string JobSupervisor::choose_restart_nodes(Job& job, const Failed& failed) {
  job.pins.clear();
  job.avoids.clear();
  std::set<size_t> slots;
  std::set<NodeId> nodes;
  for (const Member* m : failed) {
    slots.insert(m->slot);
    nodes.insert(m->node);
  }
  std::string names;
  for (const NodeId& n : nodes) names += (names.empty() ? "" : ", ") + n.short_hex();
  if (job.restart_on == "other") {
    for (const Member* m : failed) job.avoids[m->slot] = m->node;
    return " on another node than " + names;
  }
  if (job.restart_on != "same") return "";
  bool gone = false;
  for (const NodeId& n : nodes) gone = gone || dead_nodes_.count(n) > 0;
  if (gone && (job.whole_gang || nodes.size() == 1))
    return " wherever there is room (" + std::string(nodes.size() == 1 ? "its node " + names : "one of their nodes " + names) +
           " is gone)";
  for (const Member& m : job.members)
    if ((job.whole_gang || slots.count(m.slot)) && !dead_nodes_.count(m.node)) job.pins[m.slot] = m.node;
  return job.whole_gang ? " each on the node it ran on" : " on the node" + std::string(nodes.size() == 1 ? " " : "s ") + names;
}

void JobSupervisor::begin_restart(Job& job, const Failed& failed, const std::string& cause, bool whole) {
  ++job.attempt;
  const std::string where = choose_restart_nodes(job, failed);
  int64_t step = -1;
  if (auto rec = gcs::Table<gcs::JobRecord>(*host_.store).get(job.id.hex()); rec.ok()) step = rec->step;
  job.failure_streak = step > job.streak_step ? 1 : job.failure_streak + 1;  // progress since: not a loop
  job.streak_step = std::max(job.streak_step, step);
  const int64_t backoff = backoff_for(job.backoff_ms, job.failure_streak);
  job.restart_due_ms = gcs::now_ms() + backoff;
  const std::string which =
      "restart " + std::to_string(job.attempt - job.free_attempts) + " of " + std::to_string(job.max_restarts);
  const std::string at = step >= 0 ? "; it was at step " + std::to_string(step) : "";
  // For /metrics (gcs/job_recovery.h): when it failed as best known here — a lost node's last
  // heartbeat (within a heartbeat period of its end), else the moment the failure arrived — and now.
  const int64_t now = gcs::now_ms();
  int64_t failed_ms = now;
  for (const Member* m : failed) {
    if (!dead_nodes_.count(m->node)) continue;
    auto node = gcs::Table<gcs::NodeRecord>(*host_.store).get(m->node.hex());
    if (node.ok() && node->last_heartbeat_ms > 0) failed_ms = std::min(failed_ms, node->last_heartbeat_ms);
  }
  Status noted = gcs::note_restart(*host_.store, job.id, job.attempt, cause, failed_ms, now, step);
  if (!noted.ok()) spdlog::warn("job {}: recording the restart for /metrics: {}", job.id.short_hex(), noted.to_string());
  if (whole) {
    // A live job stuck while a replacement waited for room: the whole gang goes again, and the
    // replacement's ask will never be placed.
    std::vector<PlacementAsk> waiting;
    for (const auto& [slot, id] : job.replacement_ids) waiting.push_back(make_ask(job, slot, id));
    retire_unplaced(waiting, "its job restarts every worker instead");
    job.replace.clear();
    job.replacement_ids.clear();
    job.restarting = true;
    job.stop_grace_ms = gcs::now_ms() + kStopGraceMs;
    job_event(*host_.store, "job_restarting", job.id,
              "job " + job.id.short_hex() + ": " + cause + at + "; restarting its " + std::to_string(job.actors.size()) +
                  " actors from the newest checkpoint" + where + " in " + std::to_string(backoff) + " ms (" + which +
                  ")");
    note(*host_.store, job.id, which + " after: " + cause);
    stop_members(job, "job " + job.id.short_hex() + " restarts after: " + cause, false);
  } else {
    // Every failed slot in one restart, servers first (`failed` is in that order).
    for (const Member* m : failed) job.replace.push_back(m->slot);
    const std::string what = failed.size() == 1 ? "replacing it" : "replacing all " + std::to_string(failed.size());
    job_event(*host_.store, "job_restarting", job.id,
              "job " + job.id.short_hex() + ": " + cause + at + "; " + what + where + " in " +
                  std::to_string(backoff) + " ms while the others go on (" + which + ")");
    note(*host_.store, job.id, which + " after: " + cause);
  }
}

void JobSupervisor::join_restart(Job& job, const Failed& failed, const std::string& cause) {
  for (const Member* m : failed) job.replace.push_back(m->slot);
  // Servers first, as in every restart: the workers wait for the servers they cannot reach.
  std::stable_partition(job.replace.begin(), job.replace.end(),
                        [&](size_t slot) { return is_server_actor(job.actors[slot]); });
  const std::string which = "restart " + std::to_string(job.attempt - job.free_attempts);
  job_event(*host_.store, "job_restart_joined", job.id,
            "job " + job.id.short_hex() + ": " + cause + " before " + which +
                " had replaced everything it lost; replaced in that restart (one failure of the job)");
  note(*host_.store, job.id, which + " also replaces: " + describe_members(failed));
}

void JobSupervisor::place_gang_again(Job& job) {
  for (const Member& m : job.members) {
    by_addr_.erase(m.handle.address());
    if (!m.running) continue;
    spdlog::warn("job {}: {} did not exit within {} ms of being stopped; going on without it", job.id.short_hex(),
                 describe_member(m.actor, m.id, m.node), kStopGraceMs);
    host_.release(m.node, {m.actor.cpus, m.actor.gpus, 0});
  }
  job.members.clear();
  job.asks.clear();
  job.size = static_cast<int>(job.actors.size());  // elastic: start_attempt sizes it to what fits
  for (size_t slot = 0; slot < job.actors.size(); ++slot) job.asks.push_back(make_ask(job, slot));
  job.restarting = false;  // members empty: retry_pending places the gang once restart_due_ms passed
  spdlog::info("job {}: every actor of the failed attempt is down; attempt {} starts in {} ms", job.id.short_hex(),
               job.attempt, std::max<int64_t>(0, job.restart_due_ms - gcs::now_ms()));
}

bool JobSupervisor::try_replace(Job& job) {
  if (gcs::now_ms() < job.restart_due_ms) return true;
  if (job.elastic && job.live) plan_live_generation(job);
  std::vector<size_t> still;
  for (size_t slot : job.replace) {
    PlacementAsk ask = replacement_ask(job, slot);
    auto placed = host_.place({ask}, "job-" + job.id.hex() + "-" + std::to_string(job.attempt), job.policy, job.id);
    if (!placed.ok() || !placed->started) {
      const std::string why = placed.ok() ? placed->pending_reason : placed.status().message();
      if (placed.ok() && !placed->node_failures.empty()) {
        // A node that refused or did not answer may still start it late: the next try is another actor.
        retire_unplaced({ask}, "starting it failed (" + why + "); asked again as a new actor");
        job.replacement_ids.erase(slot);
      }
      note(*host_.store, job.id, "replacing " + job.actors[slot].name + ": waiting for resources: " + why);
      still.push_back(slot);
      continue;
    }
    Member m{ask.id, placed->nodes[ask.id], ask.actor, placed->handles[ask.id], true, slot};
    job.replacement_ids.erase(slot);
    job.pins.erase(slot);
    job.avoids.erase(slot);
    host_.monitor(m.handle);
    by_addr_[m.handle.address()] = job.id;
    for (Member& old : job.members) {
      if (old.slot == slot && !old.running) old = m;  // the slot's new actor
    }
    auto rec = gcs::update_job(*host_.store, job.id, [&](gcs::JobRecord& j) -> Status {
      if (gcs::job_finished(j.state)) return invalid_argument("ended");
      if (slot < j.actors.size()) j.actors[slot] = ask.id.hex();
      j.message = "running (restart " + std::to_string(job.attempt) + ")";
      return {};
    });
    (void)rec;
    count_restarts(*host_.store, m.id, job.attempt);
    job_event(*host_.store, "job_restarted", job.id,
              "job " + job.id.short_hex() + ": " + describe_member(m.actor, m.id, m.node) + " replaces the failed " +
                  job.actors[slot].name + " (restart " + std::to_string(job.attempt) + ")");
  }
  job.replace = still;
  return !still.empty();
}

void JobSupervisor::check_progress() {
  const int64_t now = gcs::now_ms();
  std::vector<JobId> stuck;
  for (auto& [id, job] : jobs_) {
    if (job.progress_timeout_ms <= 0 || !(job.whole_gang || job.live) || job.ending || job.restarting ||
        job.members.empty())
      continue;
    auto rec = gcs::Table<gcs::JobRecord>(*host_.store).get(id.hex());
    if (!rec.ok() || rec->state != gcs::JobState::running) continue;
    job.record = *rec;
    if (rec->step != job.last_step) {
      job.last_step = rec->step;
      job.last_move_ms = now;
    } else if (now - job.last_move_ms > job.progress_timeout_ms) {
      stuck.push_back(id);
    }
  }
  for (const JobId& id : stuck) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    Job& job = it->second;
    const std::string why = fmt::format("the job made no progress for {:g} s (stuck at step {}: a worker hung?)",
                                        job.progress_timeout_ms / 1000.0, job.last_step);
    spdlog::warn("job {}: {}", id.short_hex(), why);
    if (restarts_left(job)) begin_restart(job, {&job.members.front()}, why, true);
    else end_job(job, gcs::JobState::failed, why + "; no restarts left (all " + std::to_string(job.max_restarts) + " used)");
  }
  check_grow_back();
}

void JobSupervisor::after_success(Job& job) {
  // A sync, central or pipeline job's data accounting, proven from the GCS (a prediction job's: every
  // row predicted once, gcs/predict_accounting.h): every shard (a
  // pipeline: every step's batch, taken by step from the seeded order) of every epoch trained once. An async job's:
  // every example of every shard applied once on every parameter server (gcs/async_accounting.h).
  auto rec = gcs::Table<gcs::JobRecord>(*host_.store).get(job.id.hex());
  if (!rec.ok() || rec->state != gcs::JobState::succeeded) return;
  if (rec->strategy == "async") {
    account_async(job, rec->result);
    return;
  }
  if (rec->strategy == "predict") {  // every row predicted once, from the shards and their parts
    auto summary = nlohmann::json::parse(rec->result, nullptr, false);
    if (summary.is_discarded()) return;
    auto report = gcs::account_predict_job(*host_.store, job.id, summary.value("shards", 0), summary.value("rows", int64_t{0}));
    if (!report.ok()) {
      spdlog::warn("job {}: prediction accounting: {}", job.id.short_hex(), report.status().to_string());
      return;
    }
    job_event(*host_.store, report->exactly_once ? "data_accounted" : "data_accounting_failed", job.id,
              "job " + job.id.short_hex() + ": " + report->summary());
    return;
  }
  if (rec->strategy != "sync" && rec->strategy != "pipeline" && rec->strategy != "central") return;
  auto summary = nlohmann::json::parse(rec->result, nullptr, false);
  if (summary.is_discarded() || !summary.value("trained_ranges", false)) return;
  // Central: the server recorded the ranges (its versions are the job's steps); the ledger holds one
  // shard per worker and epoch.
  const bool central = rec->strategy == "central";
  auto report = gcs::account_sync_job(*host_.store, job.id,
                                      central ? summary.value("trained_steps", int64_t{0})
                                              : summary.value("steps", int64_t{0}),
                                      summary.value("steps_per_epoch", int64_t{0}),
                                      central ? summary.value("ledger_shards", 0)
                                              : rec->strategy == "sync" ? rec->workers : 0);
  if (!report.ok()) {
    spdlog::warn("job {}: data accounting: {}", job.id.short_hex(), report.status().to_string());
    return;
  }
  job_event(*host_.store, report->exactly_once ? "data_accounted" : "data_accounting_failed", job.id,
            "job " + job.id.short_hex() + ": " + report->summary());
}

void JobSupervisor::account_async(Job& job, const std::string& result) {
  auto summary = nlohmann::json::parse(result, nullptr, false);
  if (summary.is_discarded() || !summary.contains("data_accounting")) return;  // stopped at a step limit
  const nlohmann::json& a = summary["data_accounting"];
  auto report = gcs::account_async_job(*host_.store, job.id, a.value("epochs", 0), a.value("ledger_shards", 0),
                                       a.value("servers", 0));
  if (!report.ok()) {
    spdlog::warn("job {}: data accounting: {}", job.id.short_hex(), report.status().to_string());
    return;
  }
  job_event(*host_.store, report->exactly_once ? "data_accounted" : "data_accounting_failed", job.id,
            "job " + job.id.short_hex() + ": " + report->summary());
}

}  // namespace troupe::actors
