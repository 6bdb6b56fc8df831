// `troupe train --model torchscript` as a user runs it: the binary loads the bundled model library
// (lib/troupe/models/), trains a module scripted in Python on Fashion-MNIST and reports it; the
// model it saves loads into the PyTorch module in Python (evaluate_saved.py), and a state_dict saved
// from Python starts a training with --init-from.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "tests/core/temp_dir.h"
#include "tests/support/run_command.h"


using troupe::testing::CommandResult;
using troupe::testing::run_command;
using troupe::testing::troupe_binary;

namespace {

const std::string kFixtures = TROUPE_TORCH_FIXTURE_DIR;
const std::string kModule = kFixtures + "/fashion_mlp.pt";

CommandResult train(const std::string& args) {
  return run_command(troupe_binary() + " train --no-progress --json --model torchscript --trainer-arg file=" + kModule +
                     " --batch-size 64 --optimizer sgd " + args);
}

// The test accuracy Python gets from `saved` loaded into the module with load_state_dict.
double python_accuracy(const std::string& saved) {
  CommandResult r = run_command(std::string(TROUPE_TORCH_PYTHON) + " " + TROUPE_TORCH_SCRIPTS + "/evaluate_saved.py " +
                                kModule + " " + saved + " " + TROUPE_DEFAULT_DATASET_DIR);
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.last_line());
  CHECK(j.at("missing").empty());  // every parameter of the module, by its state_dict name
  CHECK(j.at("unexpected").empty());
  return j.at("accuracy").get<double>();
}

}  // namespace

TEST_CASE("troupe train --model torchscript trains a module scripted in Python on Fashion-MNIST", "[torch][cli]") {
  troupe::testing::TempDir dir;
  const std::string saved = dir.file("mlp.safetensors");
  CommandResult r = train("--epochs 1 --lr 0.05 --momentum 0.9 --save " + saved);
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.last_line());
  CHECK(j.at("model").get<std::string>().find("torchscript " + kModule + " (50890 parameters in 4 tensors)") == 0);
  const double accuracy = j.at("test_accuracy").get<double>();
  CHECK(accuracy >= 0.8);
  // The saved file is PyTorch's: load_state_dict in Python gives the same test accuracy.
  CHECK(std::fabs(python_accuracy(saved) - accuracy) <= 1e-4);

  // Not a trainer of its own: the binary names the bundled one among the known.
  CommandResult unknown = run_command(troupe_binary() + " train --no-progress --model nosuch --epochs 1");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("torchscript") != std::string::npos);
}

TEST_CASE("troupe train --model torchscript --init-from starts from a state_dict saved in Python", "[torch][cli]") {
  const std::string state = kFixtures + "/fashion_mlp_state.safetensors";
  // One step of a vanishing rate: the model troupe tests is the file's, scored as Python scores it.
  CommandResult still = train("--epochs 1 --max-steps 1 --lr 1e-30 --momentum 0 --init-from " + state);
  INFO(still.both());
  REQUIRE(still.exit_code == 0);
  const double from_file = nlohmann::json::parse(still.last_line()).at("test_accuracy").get<double>();
  CHECK(std::fabs(python_accuracy(state) - from_file) <= 1e-4);
  // And it fine-tunes from there.
  CommandResult tuned = train("--epochs 1 --lr 0.05 --momentum 0.9 --init-from " + state);
  INFO(tuned.both());
  REQUIRE(tuned.exit_code == 0);
  CHECK(nlohmann::json::parse(tuned.last_line()).at("test_accuracy").get<double>() >= 0.8);
}
