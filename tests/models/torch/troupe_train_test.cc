// `troupe train --model torchscript` as a user runs it: the binary loads the bundled model library
// (lib/troupe/models/), trains a module scripted in Python on Fashion-MNIST and reports it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "tests/support/run_command.h"


using troupe::testing::CommandResult;
using troupe::testing::run_command;
using troupe::testing::troupe_binary;

TEST_CASE("troupe train --model torchscript trains a module scripted in Python on Fashion-MNIST", "[torch][cli]") {
  const std::string module = std::string(TROUPE_TORCH_FIXTURE_DIR) + "/fashion_mlp.pt";
  CommandResult r = run_command(troupe_binary() + " train --no-progress --json --model torchscript --trainer-arg file=" +
                                module + " --epochs 1 --batch-size 64 --optimizer sgd --lr 0.05 --momentum 0.9");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.last_line());
  CHECK(j.at("model").get<std::string>().find("torchscript " + module + " (50890 parameters in 4 tensors)") == 0);
  CHECK(j.at("test_accuracy").get<double>() >= 0.8);

  // Not a trainer of its own: the binary names the bundled one among the known.
  CommandResult unknown = run_command(troupe_binary() + " train --no-progress --model nosuch --epochs 1");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("torchscript") != std::string::npos);
}
