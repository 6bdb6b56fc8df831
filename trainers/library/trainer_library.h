// Loading a user's trainer library (a shared object built against the installed troupe, see
// trainers/api/trainer.h and examples/user_trainer) into this process.
//
// The library is opened with dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND): every symbol resolved up
// front (a missing one fails here, not mid-training), none of its symbols visible to other
// libraries, and its own (and its dependencies') definitions used before the process's: libtorch's
// libprotobuf must not bind to the protobuf copy inside libsentencepiece, which troupe links (it
// crashed in libprotobuf's initialisation).
// Before any C++ type crosses from it, its troupe_trainer_abi() (plain C) is compared with this
// troupe's version and ABI; only then are its registrations added to trainer_registry(). Libraries
// are never unloaded: trainers made from them may live until the process ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe {

struct TrainerLibrary {
  std::string path;
  std::string troupe_version;         // the troupe it was built against (equal to this one's)
  uint32_t abi = 0;
  std::vector<std::string> trainers;  // the names it registers
};

// Loads the library at `path` and registers its trainers. Loading a file already loaded returns
// the same description. Errors:
//   not_found         no such file
//   invalid_argument  not an ELF shared object; dlopen failed (the message has dlerror's reason,
//                     e.g. an undefined symbol); no troupe_trainer_abi symbol (not built with
//                     troupe::trainer_api); no trainer registered; a bad or already taken name
//   version_mismatch  "libmine.so was built against troupe 0.3.0 (ABI 2); this is troupe 0.4.0
//                     (ABI 3): rebuild it against this version"
Expected<TrainerLibrary> load_trainer_library(const std::string& path);

}  // namespace troupe
