#include "trainers/job/job_model_file.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "trainers/library/trainer_file_store.h"
#include "trainers/setup/model_args.h"

namespace troupe::job {

Status ship_model_file(gcs::Store& store, JobSpec& spec) {
  const std::string path = model_file_path(spec.train);
  if (path.empty()) {
    spec.model_file_sum.clear();
    return {};
  }
  if (!spec.model_file_sum.empty()) {
    auto held = store.get(kTrainerFileBlobTable, spec.model_file_sum);
    if (held.ok() && held->has_value()) return {};
  }
  auto sum = put_trainer_file(store, path);
  if (!sum.ok()) return sum.status().with_context("shipping --model " + spec.train.model + "'s file to the nodes");
  spec.model_file_sum = *sum;
  return {};
}

Status use_model_file(gcs::Store* store, JobSpec& spec, const std::string& cache_dir) {
  const std::string key = model_file_key(spec.train.model);
  if (spec.model_file_sum.empty() || key.empty()) return {};
  const std::string setting = key + "_local=";
  auto& args = spec.train.runtime_args;  // a copy set by an earlier call goes: this call decides
  args.erase(std::remove_if(args.begin(), args.end(), [&](const std::string& a) { return a.rfind(setting, 0) == 0; }),
             args.end());
  const std::string path = model_file_path(spec.train);
  auto local = local_trainer_file(store, path, spec.model_file_sum, cache_dir);
  if (!local.ok()) return local.status();
  if (*local != path) {
    spdlog::info("model file {} is not on this machine as submitted: using the GCS's copy {}", path, *local);
    args.push_back(setting + *local);
  }
  return {};
}

}  // namespace troupe::job
