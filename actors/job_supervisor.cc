#include "actors/job_supervisor.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/gpu_assignment.h"
#include "actors/job_submissions.h"
#include "gcs/events.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {
constexpr const char* kServerType = "troupe.ps";
}  // namespace

std::string describe_member(const JobActor& a, const ActorId& id, const NodeId& node) {
  return (a.name.empty() ? a.type_name : a.name) + " (actor " + id.short_hex() + " on node " + node.short_hex() + ")";
}

void job_event(gcs::Store& store, const std::string& kind, const JobId& job, const std::string& message) {
  gcs::Event e;
  e.kind = kind;
  e.subject = job.hex();
  e.message = message;
  Status st = gcs::record_event(store, e);
  if (!st.ok()) spdlog::warn("recording event {} of job {}: {}", kind, job.short_hex(), st.to_string());
}

bool is_server_actor(const JobActor& a) { return a.type_name == kServerType; }

JobSupervisor::Job JobSupervisor::make_job(const JobId& id, const SubmitJob& request) {
  Job job;
  job.id = id;
  job.policy = request.policy;
  job.actors = request.actors;
  job.max_restarts = std::max(0, request.max_restarts);
  job.backoff_ms = std::max<int64_t>(0, request.restart_backoff_ms);
  job.whole_gang = request.restart_whole_gang;
  job.live = request.live_recovery && !request.restart_whole_gang;
  job.restore_servers = request.restore_servers;
  job.progress_timeout_ms = std::max<int64_t>(0, request.progress_timeout_ms);
  job.elastic = request.elastic && (request.restart_whole_gang || job.live);
  job.restart_on = request.restart_on.empty() ? "any" : request.restart_on;
  job.size = job.ran_size = static_cast<int>(job.actors.size());
  job.submission = request;
  return job;
}

bool JobSupervisor::any_running(const Job& job) {
  return std::any_of(job.members.begin(), job.members.end(), [](const Member& m) { return m.running; });
}

Expected<SubmitJobReply> JobSupervisor::submit(const SubmitJob& request) {
  auto id = JobId::from_hex(request.job_id);
  if (!id.ok()) return id.status().with_context("submit");
  if (request.actors.empty()) return invalid_argument("job " + id->short_hex() + " asks for no actors");
  if (jobs_.count(*id)) return invalid_argument("job " + id->short_hex() + " was already submitted");
  for (size_t i = 0; i < request.actors.size(); ++i) {
    TROUPE_RETURN_IF_ERROR(check_gpu_demand(request.actors[i].gpus, "gpus")
                               .with_context("job " + id->short_hex() + " actor " + std::to_string(i)));
  }
  auto record = gcs::Table<gcs::JobRecord>(*host_.store).get(id->hex());
  if (!record.ok()) return record.status().with_context("submit: the job must be recorded before it is submitted");
  if (record->state != gcs::JobState::pending) {
    return invalid_argument("job " + id->short_hex() + " is " + gcs::job_state_name(record->state) + ", not PENDING");
  }
  Job job = make_job(*id, request);
  job.record = *record;
  for (size_t slot = 0; slot < job.actors.size(); ++slot) job.asks.push_back(make_ask(job, slot));
  // What a restarted head needs to supervise the job again (actors/job_adoption.cc).
  TROUPE_RETURN_IF_ERROR(save_submission(*host_.store, request).with_context("submit: recording the submission"));
  SubmitJobReply reply;
  for (const PlacementAsk& a : job.asks) reply.actor_ids.push_back(a.id.hex());
  auto [it, inserted] = jobs_.emplace(*id, std::move(job));
  Status st = try_start(it->second, &reply);
  if (!st.ok()) {
    forget_job(*id, "its job could not be placed: " + st.message());
    Status ended = gcs::update_job(*host_.store, *id, gcs::finish_job(gcs::JobState::failed, st.message())).status();
    if (!ended.ok()) spdlog::warn("job {}: recording the failure: {}", id->short_hex(), ended.to_string());
    return st;
  }
  return reply;
}

Status JobSupervisor::try_start(Job& job, SubmitJobReply* reply) {
  for (PlacementAsk& a : job.asks)  // a node a restart was to go back to died meanwhile
    if (a.pin && dead_nodes_.count(*a.pin)) a.pin.reset();
  auto placed = host_.place(job.asks, "job-" + job.id.hex(), job.policy, job.id);
  if (!placed.ok()) return placed.status();
  if (!placed->started) {
    if (placed->undone) {  // asked again under new ids: the old ones will never be placed
      retire_unplaced(job.asks, "its gang started only in part and was asked again as new actors");
      for (size_t slot = 0; slot < job.asks.size(); ++slot) job.asks[slot] = make_ask(job, slot);
    }
    const std::string reason = "waiting for resources: " + placed->pending_reason;
    auto rec = gcs::update_job(*host_.store, job.id, [&](gcs::JobRecord& j) -> Status {
      if (gcs::job_finished(j.state)) return invalid_argument("ended");
      j.message = reason;
      return {};
    });
    if (!rec.ok() && rec.status().code() == Code::invalid_argument) {  // cancelled while pending
      forget_job(job.id, "its job ended while it waited for room");
      return {};
    }
    if (reply) reply->pending_reason = placed->pending_reason;
    return {};
  }
  std::vector<std::string> ids;
  for (size_t slot = 0; slot < job.asks.size(); ++slot) {
    const PlacementAsk& a = job.asks[slot];
    Member m{a.id, placed->nodes[a.id], a.actor, placed->handles[a.id], true, slot};
    host_.monitor(m.handle);
    by_addr_[m.handle.address()] = job.id;
    job.members.push_back(std::move(m));
    ids.push_back(a.id.hex());
  }
  job.pins.clear();  // this restart's placement is done
  job.avoids.clear();
  job.last_step = -1;
  job.last_move_ms = gcs::now_ms();  // the progress clock starts with the attempt
  std::set<NodeId> nodes;
  for (const Member& m : job.members) nodes.insert(m.node);
  const std::string message = "running: " + std::to_string(job.members.size()) + " actors on " +
                              std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s") +
                              (job.attempt > 0 ? " (restart " + std::to_string(job.attempt) + ")" : "");
  auto rec = gcs::update_job(*host_.store, job.id, [&](gcs::JobRecord& j) -> Status {
    if (gcs::job_finished(j.state)) return invalid_argument("job already ended");
    j.state = gcs::JobState::running;
    j.actors = ids;
    j.message = message;
    return {};
  });
  if (rec.ok()) job.record = *rec;
  if (!rec.ok()) {  // cancelled in between, or the GCS failed: take the actors down again
    spdlog::warn("job {}: {}; stopping its actors", job.id.short_hex(), rec.status().to_string());
    job.ending = true;
    stop_members(job, "job " + job.id.short_hex() + " could not start: " + rec.status().message(), false);
    return {};
  }
  for (const Member& m : job.members) {
    if (job.attempt > 0) count_restarts(*host_.store, m.id, job.attempt);  // its slot's restarts
  }
  job_event(*host_.store, job.attempt > 0 ? "job_restarted" : "job_started", job.id, "job " + job.id.short_hex() + " " + message);
  if (reply) reply->started = true;
  return {};
}

bool JobSupervisor::retry_pending() {
  bool pending = false;
  std::vector<JobId> waiting;
  for (auto& [id, job] : jobs_) {
    if (job.ending) continue;
    if (!job.replace.empty()) {
      pending = try_replace(job) || pending;
    } else if (job.restarting) {
      if (gcs::now_ms() >= job.stop_grace_ms) place_gang_again(job);
      pending = true;
    } else if (job.members.empty()) {
      if (gcs::now_ms() < job.restart_due_ms) pending = true;  // a restart's backoff
      else waiting.push_back(id);
    }
  }
  for (const JobId& id : waiting) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    Status st = start_attempt(it->second);
    if (!st.ok()) {
      spdlog::warn("job {}: placing its actors failed: {}", id.short_hex(), st.to_string());
      end_job(it->second, gcs::JobState::failed, st.message());
      forget_job(id, "its job failed: " + st.message());
      continue;
    }
    it = jobs_.find(id);
    if (it != jobs_.end() && it->second.members.empty()) pending = true;
  }
  return pending;
}

Expected<StopJobReply> JobSupervisor::stop(const StopJob& request) {
  auto id = JobId::from_hex(request.job_id);
  if (!id.ok()) return id.status().with_context("stop");
  const std::string why = request.reason.empty() ? "stopped by the user" : request.reason;
  StopJobReply reply;
  auto it = jobs_.find(*id);
  if (it != jobs_.end()) {
    for (const Member& m : it->second.members) reply.stopped += m.running ? 1 : 0;
    it->second.ending = true;
    stop_members(it->second, why, false);
    if (!any_running(it->second)) forget_job(*id, "its job was stopped: " + why);
  }
  auto rec = gcs::update_job(*host_.store, *id, gcs::finish_job(gcs::JobState::cancelled, why));
  if (rec.ok()) {
    job_event(*host_.store, "job_cancelled", *id, "job " + id->short_hex() + " cancelled: " + why);
    reply.state = gcs::job_state_name(rec->state);
    return reply;
  }
  if (rec.status().code() != Code::invalid_argument) return rec.status();  // not_found, GCS errors
  auto now = gcs::Table<gcs::JobRecord>(*host_.store).get(id->hex());
  if (!now.ok()) return now.status();
  reply.state = gcs::job_state_name(now->state);
  return reply;
}

bool JobSupervisor::on_down(const caf::actor_addr& source, const caf::error& reason, const std::string& reason_text) {
  auto owner = by_addr_.find(source);
  if (owner == by_addr_.end()) return false;
  const JobId job_id = owner->second;
  by_addr_.erase(owner);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return true;
  for (Member& m : it->second.members) {
    if (m.running && m.handle.address() == source) {
      if (reason != caf::exit_reason::unknown) {
        member_exited(it->second, m, static_cast<bool>(reason), reason_text);
      } else if (!explain_exit(it->second, m, false)) {  // actors/job_exits.cc
        unexplained_.push_back({job_id, m.id, gcs::now_ms() + exit_reason_grace_.count()});
      }
      break;
    }
  }
  return true;
}

void JobSupervisor::on_node_dead(const NodeId& node, const std::string& reason) {
  dead_nodes_.insert(node);
  std::vector<JobId> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  for (const JobId& id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    // Every actor there is gone at once: none of them is asked to stop (their node cannot answer),
    // and together they are one failure of the job (one restart: an async job replaces them all).
    Job& job = it->second;
    Failed lost;
    for (Member& m : job.members) {
      if (!m.running || m.node != node) continue;
      by_addr_.erase(m.handle.address());
      m.running = false;
      host_.release(m.node, {m.actor.cpus, m.actor.gpus, 0});
      lost.push_back(&m);
    }
    if (lost.empty()) continue;
    members_failed(job, lost, "its node " + node.short_hex() + " is gone (" + reason + ")");
    after_exit(job);  // may place a gang again, or forget the job
  }
}

bool JobSupervisor::restarting() const {
  for (const auto& [id, job] : jobs_) {
    if (!job.ending && (!job.replace.empty() || (job.attempt > 0 && (job.restarting || job.members.empty())))) return true;
  }
  return false;
}

void JobSupervisor::stop_members(Job& job, const std::string& reason, bool servers_only) {
  for (const Member& m : job.members) {
    if (!m.running || (servers_only && !is_server_actor(m.actor))) continue;
    Status st = host_.stop(m.node, m.id, reason);
    if (!st.ok() && st.code() != Code::not_found) {
      spdlog::warn("job {}: stopping {}: {}", job.id.short_hex(), describe_member(m.actor, m.id, m.node), st.to_string());
    }
  }
}

void JobSupervisor::end_job(Job& job, gcs::JobState state, const std::string& message) {
  job.ending = true;
  auto rec = gcs::update_job(*host_.store, job.id, gcs::finish_job(state, message));
  if (rec.ok()) {
    job_event(*host_.store, state == gcs::JobState::failed ? "job_failed" : "job_ended", job.id,
          "job " + job.id.short_hex() + " " + gcs::job_state_name(state) + ": " + message);
  } else if (rec.status().code() != Code::invalid_argument) {
    spdlog::error("job {}: recording {}: {}", job.id.short_hex(), gcs::job_state_name(state), rec.status().to_string());
  }
  stop_members(job, "job " + job.id.short_hex() + " " + gcs::job_state_name(state) + ": " + message, false);
}

}  // namespace troupe::actors
