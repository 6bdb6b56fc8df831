// JobSupervisor::on_gcs_lost and fill_member_record: the jobs when the GCS came back without its
// data (gcs/gcs_stamp.h). See actors/job_supervisor.h.
#include <spdlog/spdlog.h>

#include "actors/job_submissions.h"
#include "actors/job_supervisor.h"
#include "gcs/checkpoint_restore.h"
#include "gcs/events.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {

// The value of setting `key` in a job record's spec ("key=value", trainers/job/job_spec.h); "" if unset.
std::string spec_value(const gcs::JobRecord& rec, const std::string& key) {
  for (const std::string& kv : rec.spec)
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') return kv.substr(key.size() + 1);
  return "";
}

}  // namespace

bool JobSupervisor::fill_member_record(const ActorId& id, gcs::ActorRecord* record) const {
  for (const auto& [job_id, job] : jobs_) {
    for (const Member& m : job.members) {
      if (m.id != id) continue;
      record->job = job_id;
      record->resources = {m.actor.cpus, m.actor.gpus, 0};
      record->restarts = job.attempt;
      return true;
    }
  }
  return false;
}

std::string JobSupervisor::resume_after_gcs_loss(Job& job, gcs::JobRecord& rec, const std::string& what) {
  const std::string dir = spec_value(rec, "checkpoint_dir");
  if (spec_value(rec, "checkpoint_every").empty() || spec_value(rec, "checkpoint_every") == "0" || dir.empty())
    return "it wrote no checkpoints to resume from (submit with --checkpoint-every N --checkpoint-dir DIR to have "
           "it resume)";
  if (!job.whole_gang && !job.live)
    return "an async job does not resume from its checkpoints after a GCS loss: its servers' applied-data records and "
           "the ledger's resume offsets were only in the GCS (its checkpoint files stay in " + dir + ")";
  if (!job.restarting && !job.members.empty() && !restarts_left(job))
    return "its checkpoints stay, but no restarts are left (all " + std::to_string(job.max_restarts) + " used)";
  const std::string job_dir = dir + "/" + job.id.hex();
  auto restored = gcs::restore_checkpoint_mirrors(*host_.store, job.id, job_dir);
  if (!restored.ok()) return "its checkpoints cannot be written back: " + restored.status().message();
  for (const std::string& skipped : restored->scan.skipped) spdlog::warn("job {}: {}", job.id.short_hex(), skipped);
  const std::string cause = "the GCS lost its data while the job ran (" + what + "); its checkpoint of step " +
                            std::to_string(restored->step) + " (the newest of " + std::to_string(restored->checkpoints) +
                            "), its trained ranges and finished epochs were written back from " + job_dir;
  job_event(*host_.store, "checkpoints_restored", job.id,
            "job " + job.id.short_hex() + ": " + std::to_string(restored->checkpoints) + " checkpoint manifests (newest: step " +
                std::to_string(restored->step) + "), " + std::to_string(restored->ranges) + " trained ranges and " +
                std::to_string(restored->ledger_records) + " ledger records written back from " + job_dir +
                " after the GCS lost its data" +
                (restored->scan.damaged ? " (" + std::to_string(restored->scan.damaged) + " damaged manifests skipped)" : ""));
  rec.state = gcs::JobState::running;
  rec.message = "resuming from its checkpoint of step " + std::to_string(restored->step) + " after the GCS lost its data";
  rec.updated_ms = gcs::now_ms();
  Status st = gcs::Table<gcs::JobRecord>(*host_.store).put(rec);
  if (!st.ok()) return "its record cannot be written back: " + st.message();
  job.record = rec;
  spdlog::warn("job {}: {}", job.id.short_hex(), cause);
  // A restart already under way (its actors being stopped, or its placement waiting; a live job's
  // replacement: the survivors hand it their state, rank 0 records the ledger and ranges again from
  // the restored checkpoint on) finds the checkpoints now; a running attempt is stopped and the gang
  // placed again: one restart.
  if (!job.restarting && job.replace.empty() && !job.members.empty()) begin_restart(job, {}, cause, true);
  return "";
}

void JobSupervisor::on_gcs_lost(const std::string& what) {
  std::vector<JobId> forget;
  for (auto& [id, job] : jobs_) {
    Status st = save_submission(*host_.store, job.submission);
    gcs::JobRecord rec;
    if (job.record) {
      rec = *job.record;
    } else {
      rec.id = id;
      rec.submitted_ms = gcs::now_ms();
    }
    const bool waiting = job.members.empty() && job.attempt == 0 && !job.ending;
    if (waiting) {  // never started: nothing of it was lost but its record
      rec.state = gcs::JobState::pending;
      if (st.ok()) st = gcs::Table<gcs::JobRecord>(*host_.store).put(rec);
      if (!st.ok()) spdlog::warn("job {}: writing it back after the GCS lost its data: {}", id.short_hex(), st.to_string());
      continue;
    }
    std::string why_not;
    if (!st.ok()) {
      why_not = "its submission cannot be written back: " + st.message();
    } else if (job.ending || gcs::job_finished(rec.state)) {
      why_not = "it was ending already";
    } else {
      why_not = resume_after_gcs_loss(job, rec, what);
      if (why_not.empty()) continue;  // restarting from its checkpoints
    }
    const std::string why = "the GCS lost its data while the job ran (" + what + "): its shard ledger, progress, "
                            "trained ranges and checkpoint records are gone, and " + why_not +
                            ", so it cannot go on exactly once; submit it again";
    if (!gcs::job_finished(rec.state)) (void)gcs::finish_job(gcs::JobState::failed, why)(rec);
    rec.updated_ms = gcs::now_ms();
    if (st.ok()) st = gcs::Table<gcs::JobRecord>(*host_.store).put(rec);
    if (!st.ok()) spdlog::error("job {}: recording it FAILED after the GCS lost its data: {}", id.short_hex(), st.to_string());
    spdlog::error("job {} FAILED: {}", id.short_hex(), why);
    job_event(*host_.store, "job_failed", id, "job " + id.short_hex() + " FAILED: " + why);
    job.ending = true;
    job.restarting = false;
    stop_members(job, "job " + id.short_hex() + " FAILED: " + why, false);
    if (!any_running(job)) forget.push_back(id);
  }
  for (const JobId& id : forget) jobs_.erase(id);
}

}  // namespace troupe::actors
