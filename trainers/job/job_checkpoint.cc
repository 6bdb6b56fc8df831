#include "trainers/job/job_checkpoint.h"

#include <spdlog/spdlog.h>

#include "trainers/checkpoint/checkpoint_catalog.h"

namespace troupe::job {

std::string checkpoint_dir(const JobSpec& spec, const JobId& job) { return spec.checkpoint_dir + "/" + job.hex(); }

Status commit_checkpoint(gcs::Store& store, const JobId& job, const JobSpec& spec, const checkpoint::Manifest& m) {
  TROUPE_RETURN_IF_ERROR(checkpoint::write_manifest(store, job, m));
  Status pruned = checkpoint::prune_checkpoints(store, job, spec.checkpoint_keep);
  if (!pruned.ok()) spdlog::warn("job {}: pruning old checkpoints: {}", job.short_hex(), pruned.to_string());
  return {};
}

}  // namespace troupe::job
