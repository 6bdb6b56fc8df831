#include "trainers/job/job_setup.h"

#include <algorithm>
#include <filesystem>

#include "core/version.h"
#include "gcs/tables.h"
#include "data/data_source.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_file.h"
#include "trainers/job/job_model_file.h"
#include "trainers/library/trainer_file_store.h"
#include "trainers/setup/model_args.h"
#include "trainers/library/trainer_library.h"
#include "trainers/library/trainer_library_store.h"

namespace troupe::job {

Expected<JobSetup> prepare(const actors::NodeEnvironment& env, const JobId& job) {
  JobSetup s;
  auto store = gcs::RedisStore::connect(env.gcs);
  if (!store.ok()) return store.status().with_context("connecting to the GCS");
  s.store = std::move(*store);
  auto record = gcs::Table<gcs::JobRecord>(*s.store).get(job.hex());
  if (!record.ok()) return record.status();
  auto spec = from_settings(record->spec);
  if (!spec.ok()) return spec.status().with_context("the job's spec");
  s.spec = std::move(*spec);
  std::string library_file;
  if (!s.spec.library.empty()) {
    const std::string cache = (std::filesystem::temp_directory_path() / "troupe-trainer-libs").string();
    auto path = fetch_trainer_library(*s.store, s.spec.library, cache);
    if (!path.ok()) return path.status().with_context("fetching the job's trainer library");
    auto lib = load_trainer_library(*path);
    if (!lib.ok()) return lib.status().with_context("loading the job's trainer library");
    library_file = std::filesystem::path(*path).filename().string();
  }
  TROUPE_RETURN_IF_ERROR(use_model_file(s.store.get(), s.spec, default_trainer_file_cache())
                             .with_context("the job's model file on node " + env.node.short_hex()));
  // A trainer with threads of its own (the torchscript model's libtorch pool) sizes them to the worker's cpus.
  if (model_takes_cpus(s.spec.train.model))
    s.spec.train.runtime_args.push_back("cpus=" + std::to_string(std::max(1, static_cast<int>(s.spec.cpus_per_worker))));
  if (s.spec.train.dataset_dir.empty()) s.spec.train.dataset_dir = env.config.dataset_dir;
  s.spec.train.cpu_threads = static_cast<int>(env.config.cpu_threads);
  TROUPE_RETURN_IF_ERROR(validate(s.spec));
  auto data = load_train_data(s.spec.train);
  if (!data.ok()) return data.status().with_context("loading the data on node " + env.node.short_hex());
  s.train_set = std::move(data->train);
  s.test_set = std::move(data->test);
  if (s.spec.checkpoint_every > 0 && !s.spec.checkpoint_dir.empty()) {
    // What `troupe export` needs to turn the checkpoints back into a model (job_file.h).
    JobFile f{job, TROUPE_VERSION_STRING, s.train().spec(), library_file, record->spec, s.train().normalization};
    TROUPE_RETURN_IF_ERROR(ensure_job_file(checkpoint_dir(s.spec, job), f)
                               .with_context("describing the job beside its checkpoints"));
  }
  return s;
}

}  // namespace troupe::job
