// A module scripted in Python through the commands around training, as users run them on a local
// cluster: `troupe predict` of a model `troupe train --model torchscript:FILE` saved, in one process
// (the accuracy training reported) and as a job of 2 predictors (the same bytes); `troupe tune` of
// the module over a tiny space (2 trials of 1 epoch), the file named relative to the directory the
// search is started from.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>

#include "tests/cluster/cluster_fixture.h"
#include "tests/core/temp_dir.h"
#include "tests/data/numpy_fixture.h"

using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = std::string(TROUPE_TORCH_FIXTURE_DIR) + "/fashion_mlp.pt";

Json json_of(ClusterFixture& c, const std::string& args, int timeout_s = 240) {
  auto r = c.troupe(args, timeout_s);
  INFO(args << "\n" << r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  return Json::parse(r.last_line());
}

}  // namespace

TEST_CASE("torchscript: troupe predict runs a saved torch model in one process and as a job of 2 predictors, byte for "
          "byte", "[torch][cluster][predict]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");
  const std::string data = c.home() + "/data", model = c.home() + "/model.safetensors";
  fs::create_directories(data);
  write_fashion_npy(data);
  const Json trained = json_of(c, "train --model torchscript:" + kFixture + " --data " + data +
                                      " --epochs 1 --max-steps 300 --batch-size 64 --optimizer sgd --lr 0.05 "
                                      "--no-progress --json --save " + model);
  const double reported = trained.at("test_accuracy").get<double>();
  CHECK(reported >= 0.7);

  const std::string one_out = c.home() + "/one.npy", job_out = c.home() + "/job.npy";
  const Json one = json_of(c, "predict --json --no-progress --model " + model + " --data " + data +
                                  " --split test --out " + one_out);
  CHECK(one.at("rows") == 10000);
  CHECK(std::fabs(one.at("accuracy").get<double>() - reported) <= 2e-4);
  const Json job = json_of(c, "predict --json --no-progress --model " + model + " --data " + data +
                                  " --split test --workers 2 --shard-rows 1024 --out " + job_out);
  CHECK(job.at("rows") == 10000);
  CHECK(job.at("accuracy").get<double>() == one.at("accuracy").get<double>());
  const std::string a = read_bytes(one_out), b = read_bytes(job_out);
  REQUIRE(a.size() == 128 + 10000 * 10 * 4);
  CHECK(a == b);
}

TEST_CASE("torchscript: troupe tune searches a torch model (2 trials of 1 epoch), its file relative to where the "
          "search starts", "[torch][cluster][tune]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");
  TempDir work(std::string(TROUPE_BINARY_DIR) + "/test-homes");
  fs::copy_file(kFixture, work.file("net.pt"));
  auto r = run_command("cd " + work.path() + " && env TROUPE_HOME=" + c.home() + " " + troupe_binary() +
                           " tune --model torchscript:net.pt --search \"lr=grid(0.02,0.05)\" --epochs 1 "
                           "--batch-size 128 --optimizer sgd --seed 1 --search-dir " + c.home() + "/search "
                           "--json --no-progress",
                       400);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  const Json s = Json::parse(r.last_line());
  CHECK(s.at("state") == "SUCCEEDED");
  REQUIRE(s.at("trials").size() == 2u);
  for (const Json& t : s.at("trials")) {
    INFO(t.dump());
    CHECK(t.at("state") == "SUCCEEDED");
    CHECK(t.at("values").size() == 1u);
  }
  CHECK(s.at("best_value").get<double>() >= 0.75);
}
