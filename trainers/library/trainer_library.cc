#include "trainers/library/trainer_library.h"

#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

#include "trainers/api/trainer.h"
#include "trainers/library/trainer_registry.h"

namespace troupe {
namespace {

using AbiFn = const troupe_trainer_abi_info* (*)();
using RegistrationsFn = const std::vector<TrainerRegistration>* (*)();

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// dlopen's own message for a non-ELF file ("invalid ELF header") does not say what to do; check the
// magic first so that case gets a message of its own.
Status check_elf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return not_found("trainer library " + path + " does not exist");
    return io_error("cannot open trainer library " + path + ": " + std::strerror(errno));
  }
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() != 4 || std::memcmp(magic, "\x7f" "ELF", 4) != 0) {
    return invalid_argument(path + " is not a shared library (no ELF header); pass the .so that building "
                                   "your trainer produced");
  }
  return {};
}

// Libraries loaded so far, by dlopen handle (dlopen returns the same handle for the same file).
std::mutex g_mu;
std::map<void*, TrainerLibrary>& loaded() {
  static auto* m = new std::map<void*, TrainerLibrary>;
  return *m;
}

}  // namespace

Expected<TrainerLibrary> load_trainer_library(const std::string& path) {
  TROUPE_RETURN_IF_ERROR(check_elf(path));
  std::lock_guard<std::mutex> lock(g_mu);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!handle) {
    const char* why = dlerror();
    return invalid_argument("cannot load trainer library " + path + ": " + (why ? why : "dlopen failed") +
                            "; build it against this troupe (find_package(troupe)) and link troupe::trainer_api");
  }
  auto known = loaded().find(handle);
  if (known != loaded().end()) {
    dlclose(handle);  // drops the reference this call added; the first load keeps it open
    return known->second;
  }
  const std::string name = base_name(path);
  auto refuse = [&](Status st) {
    dlclose(handle);
    return st;
  };

  auto abi_fn = reinterpret_cast<AbiFn>(dlsym(handle, TROUPE_TRAINER_ABI_SYMBOL));
  const troupe_trainer_abi_info* abi = abi_fn ? abi_fn() : nullptr;
  if (!abi || !abi->troupe_version) {
    return refuse(invalid_argument(name + " is not a troupe trainer library: it exports no " +
                                   TROUPE_TRAINER_ABI_SYMBOL + "(); register a trainer in it with "
                                   "TROUPE_REGISTER_TRAINER and link it with troupe::trainer_api"));
  }
  if (abi->abi != TROUPE_TRAINER_ABI || std::strcmp(abi->troupe_version, TROUPE_VERSION_STRING) != 0) {
    return refuse(Status(Code::version_mismatch,
                         name + " was built against troupe " + abi->troupe_version + " (ABI " +
                             std::to_string(abi->abi) + "); this is troupe " + TROUPE_VERSION_STRING + " (ABI " +
                             std::to_string(TROUPE_TRAINER_ABI) + "): rebuild it against this version"));
  }
  // Same version and ABI: from here on the library's C++ types are this process's.
  auto regs_fn = reinterpret_cast<RegistrationsFn>(dlsym(handle, TROUPE_TRAINER_REGISTRATIONS_SYMBOL));
  const std::vector<TrainerRegistration>* regs = regs_fn ? regs_fn() : nullptr;
  if (!regs || regs->empty()) {
    return refuse(invalid_argument(name + " registers no trainer; add TROUPE_REGISTER_TRAINER(\"name\", "
                                          "YourTrainer) to one of its .cc files"));
  }
  Status added = trainer_registry().add(*regs, path);
  if (!added.ok()) return refuse(added);  // nothing of it was added: all or none

  TrainerLibrary lib;
  lib.path = path;
  lib.troupe_version = abi->troupe_version;
  lib.abi = abi->abi;
  for (const TrainerRegistration& r : *regs) lib.trainers.push_back(r.name);
  loaded().emplace(handle, lib);
  spdlog::info("loaded trainer library {} (troupe {}, ABI {}): {} trainer(s)", path, lib.troupe_version, lib.abi,
               lib.trainers.size());
  return lib;
}

}  // namespace troupe
