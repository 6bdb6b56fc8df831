#include "trainers/job/job_checkpoint.h"

#include <spdlog/spdlog.h>

#include "gcs/tables.h"
#include "trainers/checkpoint/checkpoint_catalog.h"

namespace troupe::job {

std::string checkpoint_dir(const JobSpec& spec, const JobId& job) { return spec.checkpoint_dir + "/" + job.hex(); }

Status commit_checkpoint(gcs::Store& store, const JobId& job, const JobSpec& spec, const checkpoint::Manifest& m) {
  TROUPE_RETURN_IF_ERROR(checkpoint::write_manifest(store, job, m));
  Status pruned = checkpoint::prune_checkpoints(store, job, spec.checkpoint_keep);
  if (!pruned.ok()) spdlog::warn("job {}: pruning old checkpoints: {}", job.short_hex(), pruned.to_string());
  return {};
}

Expected<checkpoint::TrainingState> load_resume_state(gcs::Store& store, const JobSpec& spec) {
  auto record = gcs::Table<gcs::CheckpointRecord>(store).get(spec.resume_job + "/" + std::to_string(spec.resume_step));
  if (!record.ok()) {
    return record.status().with_context("the checkpoint of step " + std::to_string(spec.resume_step) + " of job " +
                                        spec.resume_job + " to resume from");
  }
  auto state = checkpoint::load_checkpoint(checkpoint::from_record(*record));
  if (!state.ok()) return state.status().with_context("resuming from job " + spec.resume_job);
  return state;
}

}  // namespace troupe::job
