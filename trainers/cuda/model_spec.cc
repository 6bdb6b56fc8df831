#include "trainers/cuda/model_spec.h"

#include <map>
#include <mutex>

#include "trainers/setup/model_file.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, CudaModelFactory> factories;
};

Registry& registry() {
  static Registry r;  // built on first use: registrations run during static initialisation
  return r;
}

// --init-from: the file's blocks, named as the CPU trainer declares them, over the seeded start.
Status load_initial(const TrainOptions& o, const DataSpec& data, ModelSpec* spec) {
  auto setup = set_up_trainer(o, data, 0, 1);
  if (!setup.ok()) return setup.status();
  if (setup->space.size() != spec->initial.size())
    return internal_error("the GPU's " + spec->name + " has " + std::to_string(spec->initial.size()) +
                          " parameters but " + setup->where + " declares " + std::to_string(setup->space.size()));
  return load_model_into(o.init_from, setup->space, o.model, o.init_partial, spec->initial.data())
      .with_context("--init-from");
}

}  // namespace

bool register_cuda_model(const std::string& name, CudaModelFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.factories.emplace(name, std::move(factory)).second;
}

std::string cuda_model_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string names;
  for (const auto& [name, factory] : r.factories) names += (names.empty() ? "" : ", ") + name;
  return names;
}

Expected<ModelSpec> cuda_model_spec(const TrainOptions& o, DataSpec data) {
  TROUPE_RETURN_IF_ERROR(require_one_class(data, "the GPU (--device cuda)"));
  CudaModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (auto f = r.factories.find(o.model); f != r.factories.end()) factory = f->second;
  }
  if (!factory) {
    const std::string names = cuda_model_names();
    return unavailable("trainer '" + o.model + "' runs on CPUs only (the trainers with a GPU path: " +
                       (names.empty() ? std::string("none in this binary") : names) +
                       "); train it with --device cpu (or without --gpus-per-worker)");
  }
  auto spec = factory(o, data);
  if (spec.ok() && !o.init_from.empty()) TROUPE_RETURN_IF_ERROR(load_initial(o, data, &*spec));
  return spec;
}

}  // namespace troupe
