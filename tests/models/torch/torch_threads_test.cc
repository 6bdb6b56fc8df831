// libtorch's threads in a torchscript trainer (models/torch/): intra-op threads follow the cpus the
// runtime gives the worker (the runtime arg cpus=N, a job's --cpus-per-worker), --trainer-arg
// threads=N overrides them, 1 without either; inter-op work stays on the caller's thread. Read from
// libtorch itself, which the model's library brought into this process.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <string>

#include "tests/trainers/blobs.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;

namespace {

// at::get_num_threads() or at::get_num_interop_threads() of the libtorch loaded here.
int libtorch_count(const char* symbol) {
  void* lib = ::dlopen("libtorch_cpu.so.1.13", RTLD_NOW | RTLD_NOLOAD);
  const char* why = lib ? nullptr : ::dlerror();
  INFO("libtorch_cpu is not loaded: " << (why ? why : ""));
  REQUIRE(lib != nullptr);
  auto f = reinterpret_cast<int (*)()>(::dlsym(lib, symbol));
  REQUIRE(f != nullptr);
  const int n = f();
  ::dlclose(lib);
  return n;
}

int intra_op_threads_after_setup(const std::vector<std::string>& trainer_args, const std::vector<std::string>& runtime) {
  TrainOptions o;
  o.model = "torchscript";
  o.trainer_args = trainer_args;
  o.trainer_args.push_back("file=" + std::string(TROUPE_TORCH_FIXTURE_DIR) + "/fashion_mlp.pt");
  o.runtime_args = runtime;
  auto setup = set_up_trainer(o, DataSpec{784, 10}, 0, 1);
  INFO(setup.status().to_string());
  REQUIRE(setup.ok());
  return libtorch_count("_ZN2at15get_num_threadsEv");
}

}  // namespace

TEST_CASE("torchscript: libtorch's intra-op threads follow the worker's cpus unless threads= is given, with one inter-op "
          "thread", "[torch][threads]") {
  CHECK(intra_op_threads_after_setup({}, {"cpus=3"}) == 3);
  CHECK(intra_op_threads_after_setup({"threads=2"}, {"cpus=3"}) == 2);
  CHECK(intra_op_threads_after_setup({}, {}) == 1);
  CHECK(libtorch_count("_ZN2at23get_num_interop_threadsEv") == 1);
}
