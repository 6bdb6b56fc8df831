#include "trainers/export/model_export.h"

#include <chrono>
#include <filesystem>

#include "trainers/export/checkpoint_choice.h"
#include "trainers/setup/model_file.h"
#include "trainers/library/trainer_library.h"
#include "trainers/job/job_model_file.h"
#include "trainers/library/trainer_file_store.h"
#include "trainers/library/trainer_library_store.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::exporting {
namespace {

// Loads the job's trainer library, if it has one: --lib, else the GCS's copy.
Status load_library(const CheckpointSource& src, const ExportOptions& o) {
  if (src.spec.library.empty()) return {};
  const std::string which = "trainer '" + src.spec.train.model + "' of " + src.where + " comes from library " +
                            (src.library_file.empty() ? "" : src.library_file + " ") + "(xxh64 " +
                            src.spec.library + ")";
  std::string path = o.library;
  if (path.empty()) {
    if (!o.store) return invalid_argument(which + ": give that library with --lib PATH");
    const std::string cache = o.library_cache.empty()
                                  ? (std::filesystem::temp_directory_path() / "troupe-trainer-libs").string()
                                  : o.library_cache;
    auto fetched = fetch_trainer_library(*o.store, src.spec.library, cache);
    if (!fetched.ok()) return fetched.status().with_context(which + " (or give it with --lib PATH)");
    path = *fetched;
  }
  auto lib = load_trainer_library(path);
  if (!lib.ok()) return lib.status().with_context(which);
  return {};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Expected<ExportResult> export_model(const CheckpointSource& src, const ExportOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  TROUPE_RETURN_IF_ERROR(check_save_target(o.out, "--out"));
  TROUPE_RETURN_IF_ERROR(load_library(src, o));
  job::JobSpec spec = src.spec;  // its model file: the path, else the GCS's copy (job_model_file.h)
  TROUPE_RETURN_IF_ERROR(job::use_model_file(o.store, spec, default_trainer_file_cache())
                             .with_context("the model file of " + src.where));
  const TrainOptions& train = spec.train;
  auto setup = set_up_trainer(train, src.data, 0, 1);
  if (!setup.ok()) return setup.status().with_context("setting up " + src.where + "'s trainer '" + train.model + "'");
  auto chosen = choose_checkpoint(src, o.step, setup->space.size());
  if (!chosen.ok()) return chosen.status();
  const checkpoint::TrainingState& state = chosen->state;
  std::map<std::string, std::string> metadata =
      model_metadata(train, src.data, src.normalization, setup->model, state.step, static_cast<int>(state.epoch), -1);
  metadata["troupe.job"] = src.job.hex();
  metadata["troupe.strategy"] = src.spec.strategy;
  metadata["troupe.checkpoint"] = chosen->dir;
  // Shard by shard into the file: what is held at once is one shard, never the whole model.
  auto writer = ModelWriter::create(o.out, setup->space, o.dtype, metadata);
  if (!writer.ok()) return writer.status().with_context("--out");
  TROUPE_RETURN_IF_ERROR(checkpoint::read_shards(chosen->manifest, setup->space.size(), [&](checkpoint::ShardData& s) {
    return (*writer)->write_range(s.header.begin, s.params.data(), s.params.size());
  }));
  TROUPE_RETURN_IF_ERROR((*writer)->commit().with_context("--out"));
  ExportResult r;
  r.out = o.out;
  r.job = src.job;
  r.strategy = src.spec.strategy;
  r.step = state.step;
  r.epoch = state.epoch;
  r.checkpoint_dir = chosen->dir;
  r.trainer = train.model;
  r.model = setup->model;
  r.parameters = setup->space.size();
  r.shards = static_cast<int>(chosen->manifest.shards.size());
  std::error_code ec;
  r.bytes = std::filesystem::file_size(o.out, ec);
  r.dtype = o.dtype;
  r.skipped = std::move(chosen->skipped);
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace troupe::exporting
