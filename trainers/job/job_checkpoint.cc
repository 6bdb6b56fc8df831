#include "trainers/job/job_checkpoint.h"

#include <spdlog/spdlog.h>

#include "gcs/checkpoint_mirror.h"
#include "trainers/checkpoint/checkpoint_catalog.h"

namespace troupe::job {

std::string checkpoint_dir(const JobSpec& spec, const JobId& job) { return spec.checkpoint_dir + "/" + job.hex(); }

Status commit_checkpoint(gcs::Store& store, const JobId& job, const JobSpec& spec, const checkpoint::Manifest& m,
                         int64_t steps_per_epoch) {
  // The mirror first, so every manifest in the GCS has one on disk (what survives a GCS that lost
  // its data). Its ranges start where this job's do: 0, or the step a `--resume`d job started at.
  const int64_t first_step = spec.resume_job.empty() ? 0 : spec.resume_step;
  auto mirror = gcs::gather_mirror(store, checkpoint::to_record(job, m), steps_per_epoch, first_step);
  if (!mirror.ok()) return mirror.status().with_context("mirroring the checkpoint of step " + std::to_string(m.step));
  if (steps_per_epoch > 0) {
    Status tiles = gcs::check_ranges_tile(mirror->trained, steps_per_epoch, first_step, m.step);
    if (!tiles.ok())
      spdlog::warn("job {}: the mirror of the checkpoint of step {} will not be trusted after a GCS loss: {}",
                   job.short_hex(), m.step, tiles.message());
  }
  TROUPE_RETURN_IF_ERROR(gcs::write_checkpoint_mirror(*mirror));
  TROUPE_RETURN_IF_ERROR(checkpoint::write_manifest(store, job, m));
  Status pruned = checkpoint::prune_checkpoints(store, job, spec.checkpoint_keep);
  if (!pruned.ok()) spdlog::warn("job {}: pruning old checkpoints: {}", job.short_hex(), pruned.to_string());
  return {};
}

}  // namespace troupe::job
