// examples/torch_model's libtorch module in C++ (models/torch/module_trainer.h), built against the
// installed troupe and Debian's libtorch by build_torch_module.sh (a CTest fixture), loaded as
// `--lib` loads it: one process learns, sync replicas of 2 hold one process's parameters, `troupe
// train --lib` trains it, a sync job on a cluster trains it on each node, and the same library
// compiled against another libtorch is refused with an error that says what to do.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cluster/cluster_fixture.h"
#include "tests/models/torch/torch_jobs.h"
#include "tests/support/numeric_test_util.h"
#include "tests/support/run_command.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/library/trainer_library.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using troupe::testing::relative_difference;

namespace {

const std::string kLib = std::string(TROUPE_TORCH_MODULE_DIR) + "/cmake/libtorch_net.so";
const std::string kOtherTorchLib = std::string(TROUPE_TORCH_MODULE_DIR) + "/libtorch_net_9.9.so";

TrainOptions cnn_job() { return troupe::testing::torch_sgd_job("fashion-cnn", {"input_shape=1,28,28"}, 5); }

}  // namespace

TEST_CASE("torch module: a libtorch module in C++ loads with --lib, learns, and 2 sync replicas hold one "
          "process's parameters", "[torch][user_module]") {
  auto lib = load_trainer_library(kLib);
  INFO(lib.status().to_string());
  REQUIRE(lib.ok());
  CHECK(lib->trainers == std::vector<std::string>{"fashion-cnn"});
  const Dataset train = blobs(240, 4, 28, 3), test = blobs(80, 4, 28, 4);
  std::vector<float> want;
  auto one = train_with_trainer(cnn_job(), train, test, {}, &want);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  CHECK(one->test_accuracy >= 0.9);
  auto two = troupe::testing::run_replica_threads(2, cnn_job(), train, test, nullptr);
  INFO(two.errors());
  REQUIRE(two.all_ok());
  CHECK(two.identical());
  const double diff = relative_difference(two.params[0], want);
  INFO("relative difference to one process: " << diff);
  CHECK(diff < 1e-5);
}

TEST_CASE("torch module: troupe train --lib trains the C++ module on Fashion-MNIST", "[torch][user_module][cli]") {
  auto r = troupe::testing::run_command(std::string(TROUPE_BINARY_DIR) + "/bin/troupe train --no-progress --json --lib " +
                                            kLib + " --model fashion-cnn --trainer-arg input_shape=1,28,28 --epochs 1 "
                                            "--max-steps 150 --batch-size 64",
                                        300);
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("\"test_accuracy\"") != std::string::npos);
  const size_t at = r.out.rfind("\"test_accuracy\":");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(r.out.substr(at + 16)) > 0.7);
}

TEST_CASE("torch module: a library built against another libtorch is refused, naming both versions and the fix",
          "[torch][user_module][errors]") {
  auto r = troupe::testing::run_command(std::string(TROUPE_BINARY_DIR) + "/bin/troupe train --no-progress --lib " +
                                            kOtherTorchLib + " --model fashion-cnn --trainer-arg input_shape=1,28,28 "
                                            "--epochs 1 --max-steps 5",
                                        120);
  INFO(r.both());
  CHECK(r.exit_code != 0);
  CHECK(r.both().find("built against libtorch 9.9.0, but this process runs libtorch 1.13") != std::string::npos);
  CHECK(r.both().find("-DTorch_DIR=") != std::string::npos);
}

TEST_CASE("torch module: a sync job of the C++ module on a cluster ships the library through the GCS and trains on "
          "each node", "[torch][user_module][cluster]") {
  troupe::testing::ClusterFixture c;
  c.up_beside_head(2, 2);  // a worker on each node, each loading the library the GCS gave its node
  auto r = c.troupe("submit --strategy sync --workers 2 --lib " + kLib + " --model fashion-cnn --trainer-arg "
                    "input_shape=1,28,28 --epochs 1 --max-steps 120 --batch-size 64 --json --no-progress", 300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  const auto result = nlohmann::json::parse(r.last_line());
  CHECK(result.at("model").get<std::string>().find("libtorch module") != std::string::npos);
  CHECK(result.at("steps") == 120);
  CHECK(result.at("test_accuracy").get<double>() > 0.6);
}
