#include "trainers/library/trainer_registry.h"

#include <algorithm>

#include "trainers/library/bundled_models.h"

namespace troupe {

Status check_trainer_name(const std::string& name) {
  const bool ok_chars = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
  if (name.empty() || name.size() > 64 || !ok_chars) {
    return invalid_argument("trainer name '" + name + "' must be 1 to 64 characters of a-z, 0-9, '_', '.', '-'");
  }
  return {};
}

Expected<RegisteredTrainer> TrainerRegistry::find_registered(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const RegisteredTrainer& t : trainers_) {
    if (t.name == name) return t;
  }
  return not_found(name);
}

Expected<RegisteredTrainer> TrainerRegistry::find(const std::string& name) const {
  auto found = find_registered(name);
  if (found.ok()) return found;
  // A bundled model (bundled_models.h) registers itself in the process's registry when loaded.
  if (this == &trainer_registry()) {
    Status bundled = load_bundled_model(name);
    if (bundled.ok()) return find_registered(name);
    if (bundled.code() != Code::not_found) return bundled;
  }
  return not_found("unknown trainer '" + name + "'; known: " + names_list() +
                   " (a trainer of your own: build it as a library and pass --lib libmine.so)");
}

Expected<std::unique_ptr<Trainer>> TrainerRegistry::create(const std::string& name) const {
  auto t = find(name);
  if (!t.ok()) return t.status();
  std::unique_ptr<Trainer> trainer = t->factory();
  if (!trainer) return internal_error("the factory of trainer '" + name + "' (" + t->origin + ") returned null");
  return trainer;
}

bool TrainerRegistry::contains(const std::string& name) const { return find(name).ok(); }

std::vector<std::string> TrainerRegistry::names() const {
  std::vector<std::string> out = this == &trainer_registry() ? bundled_model_names() : std::vector<std::string>{};
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const RegisteredTrainer& t : trainers_) out.push_back(t.name);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string TrainerRegistry::names_list() const {
  std::string list;
  for (const std::string& n : names()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

Status TrainerRegistry::add(const std::vector<TrainerRegistration>& registrations, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RegisteredTrainer> fresh;
  for (const TrainerRegistration& r : registrations) {
    const std::string name = r.name ? r.name : "";
    TROUPE_RETURN_IF_ERROR(check_trainer_name(name).with_context(origin));
    if (!r.factory) return invalid_argument(origin + ": trainer '" + name + "' has no factory");
    for (const RegisteredTrainer& t : trainers_) {
      if (t.name != name) continue;
      if (t.origin == origin) return {};  // this origin was added before
      return invalid_argument(origin + " registers a trainer named '" + name + "', which " + t.origin +
                              " already registered; rename one of them");
    }
    for (const RegisteredTrainer& t : fresh) {
      if (t.name == name) return invalid_argument(origin + " registers the trainer name '" + name + "' twice");
    }
    fresh.push_back(RegisteredTrainer{name, origin, r.factory});
  }
  trainers_.insert(trainers_.end(), fresh.begin(), fresh.end());
  return {};
}

TrainerRegistry& trainer_registry() {
  static TrainerRegistry* registry = [] {
    // The built-in models (models/) register from OBJECT libraries that every binary offering them
    // links (TROUPE_MODEL_LIBS), so their static registrations are always there by now.
    auto* r = new TrainerRegistry;  // never destroyed: trainers may outlive static destruction order
    Status st = r->add(detail::local_trainer_registrations(), "built-in");
    (void)st;  // built-in names are literals of this repository; trainer_registry_test checks them
    return r;
  }();
  return *registry;
}

}  // namespace troupe
