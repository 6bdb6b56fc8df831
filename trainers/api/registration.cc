// The registrations of one binary or library and the two C entry points the runtime reads from a
// library. This file is compiled into troupe::trainer_api, a static library with hidden visibility:
// every shared library that links it gets its own private list, so registering at load time never
// reaches into the loading process before that process has checked the library's version.
#include "trainers/api/trainer.h"

namespace troupe {
namespace detail {

std::vector<TrainerRegistration>& mutable_registrations() {
  static std::vector<TrainerRegistration> list;  // constructed on first use: safe from static initialisers
  return list;
}

const std::vector<TrainerRegistration>& local_trainer_registrations() { return mutable_registrations(); }

}  // namespace detail

TrainerRegistrar::TrainerRegistrar(const char* name, TrainerFactory factory) {
  detail::mutable_registrations().push_back(TrainerRegistration{name, factory});
}

}  // namespace troupe

extern "C" {

__attribute__((visibility("default"))) const troupe_trainer_abi_info* troupe_trainer_abi(void) {
  static const troupe_trainer_abi_info info{TROUPE_TRAINER_ABI, TROUPE_VERSION_STRING};
  return &info;
}

__attribute__((visibility("default"))) const std::vector<troupe::TrainerRegistration>*
troupe_trainer_registrations(void) {
  return &troupe::detail::local_trainer_registrations();
}

}  // extern "C"
