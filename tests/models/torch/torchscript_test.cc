// The torchscript model (models/torch/): a module scripted in Python (make_torch_fixtures.py) loaded
// as users load theirs, its parameters and gradients views of troupe's flat buffers. One step gives
// PyTorch's loss and gradients; sync replicas hold one process's parameters; bad modules and files
// get errors naming them. The library is loaded as the troupe binary loads it (bundled_models.h).
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/models/torch/reference_batch.h"
#include "tests/models/torch/torch_jobs.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/library/bundled_models.h"
#include "trainers/library/trainer_registry.h"
#include "trainers/optim/param_init.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using Json = nlohmann::json;
using troupe::testing::relative_difference;

namespace {

std::string fixture(const std::string& name) { return std::string(TROUPE_TORCH_FIXTURE_DIR) + "/" + name; }

Json reference() {
  std::ifstream in(fixture("small_cnn.json"));
  REQUIRE(in.good());
  return Json::parse(in);
}

// Records which blocks the trainer announced ready, and how often.
class Announced final : public GradientHook {
 public:
  void ready(const Param& p) override { seen.push_back(p.index); }
  std::vector<int> seen;
};

struct Made {
  std::unique_ptr<Trainer> trainer;
  ParameterSpace space;
  Status status;
};

// The torchscript trainer set up on `file` for 1x8x8 inputs of `classes` classes.
Made make(const std::string& file, int classes = 4) {
  Made m;
  auto t = trainer_registry().create("torchscript");
  REQUIRE(t.ok());
  m.trainer = std::move(*t);
  TrainerContext ctx;
  ctx.data.features = 64;
  ctx.data.classes = classes;
  ctx.seed = 3;
  ctx.config.set("file", file);
  ctx.config.set("input_shape", "1,8,8");
  m.status = m.trainer->setup(ctx, m.space);
  if (m.status.ok()) m.status = m.space.status();
  return m;
}

TrainOptions blob_job() {
  return troupe::testing::torch_sgd_job("torchscript", {"file=" + fixture("small_cnn.pt"), "input_shape=1,8,8"}, 2);
}

}  // namespace

TEST_CASE("torchscript: the module's parameters are declared by their state_dict names with the module's values, and "
          "one step gives PyTorch's loss and gradients", "[torch]") {
  INFO("bundled models in " << bundled_models_dir());
  Made m = make(fixture("small_cnn.pt"));
  INFO(m.status.to_string());
  REQUIRE(m.status.ok());
  const Json ref = reference();
  std::vector<std::string> names;
  for (const ParamBlock& b : m.space.blocks()) names.push_back(b.name);
  CHECK(names == std::vector<std::string>{"conv.weight", "conv.bias", "fc.weight", "fc.bias"});

  // The runtime's initialisation is the module's own (ABI 8 given values), whatever the seed.
  std::vector<float> params(m.space.size()), grads(m.space.size(), 0.0f);
  init_parameters(m.space, 12345, params.data());
  for (const ParamBlock& b : m.space.blocks()) {
    const std::vector<float> want = ref.at("params").at(b.name).get<std::vector<float>>();
    CHECK(std::vector<float>(params.begin() + b.param.offset, params.begin() + b.param.offset + b.param.numel) == want);
  }

  const troupe::testing::ReferenceBatch reference(ref);
  const Batch& batch = reference.batch;
  Announced hook;
  Gradients g(grads.data(), grads.size(), &hook);
  auto stats = m.trainer->forward_backward(batch, Parameters(params.data(), params.size()), g);
  INFO(stats.status().to_string());
  REQUIRE(stats.ok());
  CHECK(stats->loss == Approx(ref.at("loss").get<double>()).epsilon(1e-5));
  for (const ParamBlock& b : m.space.blocks()) {
    const std::vector<float> want = ref.at("grads").at(b.name).get<std::vector<float>>();
    const std::vector<float> got(grads.begin() + b.param.offset, grads.begin() + b.param.offset + b.param.numel);
    INFO(b.name);
    CHECK(relative_difference(got, want) < 1e-5);
  }
  // Every block announced once, as autograd finished it: the last layer's before the first's.
  CHECK(std::multiset<int>(hook.seen.begin(), hook.seen.end()) == std::multiset<int>{0, 1, 2, 3});
  REQUIRE(hook.seen.size() == 4u);
  CHECK(hook.seen.front() >= 2);

  // A second step on the same buffers: the gradients are this step's (the runtime zeroes them).
  std::fill(grads.begin(), grads.end(), 0.0f);
  hook.seen.clear();
  REQUIRE(m.trainer->forward_backward(batch, Parameters(params.data(), params.size()), g).ok());
  const ParamBlock& fc = m.space.blocks()[3];
  CHECK(relative_difference(std::vector<float>(grads.begin() + fc.param.offset, grads.begin() + fc.param.offset + fc.param.numel),
                            ref.at("grads").at("fc.bias").get<std::vector<float>>()) < 1e-5);
  CHECK(hook.seen.size() == 4u);

  auto eval = m.trainer->evaluate(batch, Parameters(params.data(), params.size()));
  REQUIRE(eval.ok());
  CHECK(eval->loss == Approx(ref.at("loss").get<double>()).epsilon(1e-5));
  CHECK(eval->correct >= 0);
}

TEST_CASE("torchscript: trains blobs, and sync replicas of 2 and 4 hold one process's parameters", "[torch][sync]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  TrainOptions o = blob_job();
  std::vector<float> want;
  auto one = train_with_trainer(o, train, test, {}, &want);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  CHECK(one->test_accuracy >= 0.9);
  for (int n : {2, 4}) {
    auto run = troupe::testing::run_replica_threads(n, o, train, test, nullptr);
    INFO(n << " replicas: " << run.errors());
    REQUIRE(run.all_ok());
    CHECK(run.identical());
    const double diff = relative_difference(run.params[0], want);
    INFO("relative difference to one process: " << diff);
    CHECK(diff < 1e-5);
  }
}

TEST_CASE("torchscript: a missing file argument, a file that is not TorchScript, scores of the wrong width and a "
          "module that raises each get an error naming them", "[torch][errors]") {
  Made none = make("");
  CHECK(none.status.code() == Code::invalid_argument);
  CHECK_THAT(none.status.message(), Catch::Contains("--trainer-arg file=model.pt"));

  Made text = make(fixture("not_torchscript.pt"));
  CHECK(text.status.code() == Code::invalid_argument);
  CHECK_THAT(text.status.message(), Catch::Contains("cannot load " + fixture("not_torchscript.pt") + " as TorchScript"));

  Made missing = make(fixture("no_such_file.pt"));
  CHECK(missing.status.code() == Code::invalid_argument);
  CHECK_THAT(missing.status.message(), Catch::Contains("no_such_file.pt"));

  const Dataset train = blobs(48, 4, 8, 3), test = blobs(24, 4, 8, 4);
  TrainOptions o = blob_job();
  o.epochs = 1;
  o.trainer_args = {"file=" + fixture("wrong_width.pt"), "input_shape=1,8,8"};
  auto wrong = train_with_trainer(o, train, test, {}, nullptr);
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.status().message(), Catch::Contains("returned scores of shape [24, 3]; [24, 4] expected"));

  o.trainer_args = {"file=" + fixture("raises.pt"), "input_shape=1,8,8"};
  auto raised = train_with_trainer(o, train, test, {}, nullptr);
  REQUIRE_FALSE(raised.ok());
  CHECK_THAT(raised.status().message(), Catch::Contains("this module refuses every batch"));
  CHECK_THAT(raised.status().message(), Catch::Contains("raises.pt"));

  o.trainer_args = {"file=" + fixture("small_cnn.pt"), "input_shape=1,8,9"};
  auto shape = train_with_trainer(o, train, test, {}, nullptr);
  REQUIRE_FALSE(shape.ok());
  CHECK_THAT(shape.status().message(), Catch::Contains("input_shape: 72 values per example, but the data has 64"));
}
