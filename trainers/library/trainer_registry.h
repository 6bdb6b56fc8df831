// The process-wide registry of trainers (trainers/api/trainer.h) by name: the built-in ones (mlp)
// and those of every library loaded with load_trainer_library (trainers/library/trainer_library.h). Each
// binary or library collects its own TROUPE_REGISTER_TRAINER registrations; this registry is where
// the runtime brings them together, after it has checked a library's version.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "trainers/api/trainer.h"

namespace troupe {

struct RegisteredTrainer {
  std::string name;
  std::string origin;  // "built-in" or the path of the library that registered it
  TrainerFactory factory = nullptr;
};

class TrainerRegistry {
 public:
  // A new trainer of the one registered as `name`. not_found when there is none:
  // "unknown trainer 'cnn'; known: logreg, mlp (load a trainer library with --lib)".
  Expected<std::unique_ptr<Trainer>> create(const std::string& name) const;
  bool contains(const std::string& name) const;
  // The process's registry loads a bundled model (trainers/library/bundled_models.h) the first time
  // its name is asked for.
  Expected<RegisteredTrainer> find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  std::string names_list() const;          // "logreg, mlp"

  // Adds every registration, all or none: a name that is malformed or already taken (by another
  // origin) is invalid_argument naming both origins. Registering the same origin twice is a no-op.
  Status add(const std::vector<TrainerRegistration>& registrations, const std::string& origin);

 private:
  Expected<RegisteredTrainer> find_registered(const std::string& name) const;  // not_found(name) when absent

  mutable std::mutex mu_;
  std::vector<RegisteredTrainer> trainers_;
};

// The registry of this process, holding the built-in trainers from its first use.
TrainerRegistry& trainer_registry();

// invalid_argument unless `name` is 1-64 characters of [a-z0-9_.-].
Status check_trainer_name(const std::string& name);

}  // namespace troupe
