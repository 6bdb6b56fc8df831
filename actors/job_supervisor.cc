#include "actors/job_supervisor.h"

#include <spdlog/spdlog.h>

#include "gcs/events.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {

constexpr const char* kServerType = "troupe.ps";

std::string describe_member(const JobActor& a, const ActorId& id, const NodeId& node) {
  return (a.name.empty() ? a.type_name : a.name) + " (actor " + id.short_hex() + " on node " + node.short_hex() + ")";
}

void event(gcs::Store& store, const std::string& kind, const JobId& job, const std::string& message) {
  gcs::Event e;
  e.kind = kind;
  e.subject = job.hex();
  e.message = message;
  Status st = gcs::record_event(store, e);
  if (!st.ok()) spdlog::warn("recording event {} of job {}: {}", kind, job.short_hex(), st.to_string());
}

}  // namespace

bool is_server_actor(const JobActor& a) { return a.type_name == kServerType; }

Expected<SubmitJobReply> JobSupervisor::submit(const SubmitJob& request) {
  auto id = JobId::from_hex(request.job_id);
  if (!id.ok()) return id.status().with_context("submit");
  if (request.actors.empty()) return invalid_argument("job " + id->short_hex() + " asks for no actors");
  if (jobs_.count(*id)) return invalid_argument("job " + id->short_hex() + " was already submitted");
  auto record = gcs::Table<gcs::JobRecord>(*host_.store).get(id->hex());
  if (!record.ok()) return record.status().with_context("submit: the job must be recorded before it is submitted");
  if (record->state != gcs::JobState::pending) {
    return invalid_argument("job " + id->short_hex() + " is " + gcs::job_state_name(record->state) + ", not PENDING");
  }
  Job job;
  job.id = *id;
  job.policy = request.policy;
  for (const JobActor& a : request.actors) {
    PlacementAsk ask{ActorId::random(), a};
    ask.actor.args.push_back(ask.id.hex());  // a job actor learns its own id from its last argument
    job.asks.push_back(std::move(ask));
  }
  SubmitJobReply reply;
  for (const PlacementAsk& a : job.asks) reply.actor_ids.push_back(a.id.hex());
  auto [it, inserted] = jobs_.emplace(*id, std::move(job));
  Status st = try_start(it->second, &reply);
  if (!st.ok()) {
    jobs_.erase(it);
    Status ended = gcs::update_job(*host_.store, *id, gcs::finish_job(gcs::JobState::failed, st.message())).status();
    if (!ended.ok()) spdlog::warn("job {}: recording the failure: {}", id->short_hex(), ended.to_string());
    return st;
  }
  return reply;
}

Status JobSupervisor::try_start(Job& job, SubmitJobReply* reply) {
  auto placed = host_.place(job.asks, "job-" + job.id.hex(), job.policy, job.id);
  if (!placed.ok()) return placed.status();
  if (!placed->started) {
    const std::string reason = "waiting for resources: " + placed->pending_reason;
    auto rec = gcs::update_job(*host_.store, job.id, [&](gcs::JobRecord& j) -> Status {
      if (gcs::job_finished(j.state)) return invalid_argument("ended");
      j.message = reason;
      return {};
    });
    if (!rec.ok() && rec.status().code() == Code::invalid_argument) {  // cancelled while pending
      jobs_.erase(job.id);
      return {};
    }
    if (reply) reply->pending_reason = placed->pending_reason;
    return {};
  }
  std::vector<std::string> ids;
  for (const PlacementAsk& a : job.asks) {
    Member m{a.id, placed->nodes[a.id], a.actor, placed->handles[a.id], true};
    host_.monitor(m.handle);
    by_addr_[m.handle.address()] = job.id;
    job.members.push_back(std::move(m));
    ids.push_back(a.id.hex());
  }
  std::set<NodeId> nodes;
  for (const Member& m : job.members) nodes.insert(m.node);
  const std::string message = "running: " + std::to_string(job.members.size()) + " actors on " +
                              std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s");
  auto rec = gcs::update_job(*host_.store, job.id, [&](gcs::JobRecord& j) -> Status {
    if (gcs::job_finished(j.state)) return invalid_argument("job already ended");
    j.state = gcs::JobState::running;
    j.actors = ids;
    j.message = message;
    return {};
  });
  if (!rec.ok()) {  // cancelled in between, or the GCS failed: take the actors down again
    spdlog::warn("job {}: {}; stopping its actors", job.id.short_hex(), rec.status().to_string());
    job.ending = true;
    stop_members(job, "job " + job.id.short_hex() + " could not start: " + rec.status().message(), false);
    return {};
  }
  event(*host_.store, "job_started", job.id, "job " + job.id.short_hex() + " " + message);
  if (reply) reply->started = true;
  return {};
}

bool JobSupervisor::retry_pending() {
  bool pending = false;
  std::vector<JobId> waiting;
  for (auto& [id, job] : jobs_) if (job.members.empty()) waiting.push_back(id);
  for (const JobId& id : waiting) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    Status st = try_start(it->second, nullptr);
    if (!st.ok()) {
      spdlog::warn("job {}: placing its actors failed: {}", id.short_hex(), st.to_string());
      end_job(it->second, gcs::JobState::failed, st.message());
      jobs_.erase(id);
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
    if (it->second.members.empty()) jobs_.erase(it);
  }
  auto rec = gcs::update_job(*host_.store, *id, gcs::finish_job(gcs::JobState::cancelled, why));
  if (rec.ok()) {
    event(*host_.store, "job_cancelled", *id, "job " + id->short_hex() + " cancelled: " + why);
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
  Job& job = it->second;
  Member* member = nullptr;
  for (Member& m : job.members) if (m.handle.address() == source) member = &m;
  if (!member) return true;
  member->running = false;
  host_.release(member->node, {member->actor.cpus, member->actor.gpus, 0});
  if (reason && !job.ending) {
    const std::string why = describe_member(member->actor, member->id, member->node) + " failed: " + reason_text;
    spdlog::warn("job {}: {}", job_id.short_hex(), why);
    end_job(job, gcs::JobState::failed, why);
  }
  bool workers_left = false, anyone_left = false;
  for (const Member& m : job.members) {
    anyone_left = anyone_left || m.running;
    workers_left = workers_left || (m.running && !is_server_actor(m.actor));
  }
  if (!workers_left && anyone_left && !job.ending) {
    job.ending = true;
    stop_members(job, "the job's workers are done", true);
  }
  if (!anyone_left) {
    // Every actor ended normally: rank 0 recorded SUCCEEDED before it returned, unless it could not.
    if (!job.ending) end_job(job, gcs::JobState::failed, "every worker exited, but none recorded a result");
    jobs_.erase(it);
  }
  return true;
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
    event(*host_.store, state == gcs::JobState::failed ? "job_failed" : "job_ended", job.id,
          "job " + job.id.short_hex() + " " + gcs::job_state_name(state) + ": " + message);
  } else if (rec.status().code() != Code::invalid_argument) {
    spdlog::error("job {}: recording {}: {}", job.id.short_hex(), gcs::job_state_name(state), rec.status().to_string());
  }
  stop_members(job, "job " + job.id.short_hex() + " " + gcs::job_state_name(state) + ": " + message, false);
}

}  // namespace troupe::actors
