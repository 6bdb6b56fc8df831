// `troupe train` of a scripted BatchNorm CNN on Fashion-MNIST: the file --save writes holds the
// parameters and the buffers (running statistics, the batch count) under their state_dict names,
// so Python's load_state_dict loads all of it and scores, in eval mode, the test accuracy troupe
// reported (evaluate_saved.py).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "data/safetensors.h"
#include "tests/core/temp_dir.h"
#include "tests/support/run_command.h"

using troupe::testing::CommandResult;
using troupe::testing::run_command;
using troupe::testing::troupe_binary;

namespace {

const std::string kModule = std::string(TROUPE_TORCH_FIXTURE_DIR) + "/fashion_bn_cnn.pt";

const troupe::data::NamedTensor& tensor(const troupe::data::TensorFile& f, const std::string& name) {
  const troupe::data::NamedTensor* t = f.find(name);
  INFO(name);
  REQUIRE(t);
  return *t;
}

std::vector<float> floats(const troupe::data::NamedTensor& t) {
  REQUIRE(t.dtype == "F32");
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

}  // namespace

TEST_CASE("troupe train --save writes a BatchNorm CNN's buffers by their state_dict names, and Python scores the "
          "file as troupe did", "[torch][cli][buffers]") {
  troupe::testing::TempDir dir;
  const std::string saved = dir.file("bn.safetensors");
  CommandResult r = run_command(troupe_binary() + " train --no-progress --json --model torchscript --trainer-arg file=" +
                                kModule + " --batch-size 64 --optimizer sgd --lr 0.05 --momentum 0.9 --epochs 1 "
                                "--max-steps 150 --save " + saved);
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.last_line());
  CHECK(j.at("model").get<std::string>().find("10 tensors, 6 buffers") != std::string::npos);
  const double accuracy = j.at("test_accuracy").get<double>();
  CHECK(accuracy >= 0.7);

  auto file = troupe::data::read_safetensors(saved);
  REQUIRE(file.ok());
  const auto& count = tensor(*file, "bn2.num_batches_tracked");
  CHECK(count.shape.empty());
  CHECK(floats(count) == std::vector<float>{150.0f});
  const std::vector<float> var = floats(tensor(*file, "bn1.running_var"));
  REQUIRE(var.size() == 4u);
  CHECK(var != std::vector<float>(4, 1.0f));  // trained, not the module's start

  CommandResult py = run_command(std::string(TROUPE_TORCH_PYTHON) + " " + TROUPE_TORCH_SCRIPTS + "/evaluate_saved.py " +
                                 kModule + " " + saved + " " + TROUPE_DEFAULT_DATASET_DIR);
  INFO(py.both());
  REQUIRE(py.exit_code == 0);
  const auto p = nlohmann::json::parse(py.last_line());
  CHECK(p.at("missing").empty());  // every parameter and buffer, by its state_dict name
  CHECK(p.at("unexpected").empty());
  CHECK(std::fabs(p.at("accuracy").get<double>() - accuracy) <= 1e-4);
}
