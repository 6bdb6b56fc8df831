// A module's buffers (BatchNorm's running_mean, running_var, num_batches_tracked) as model state
// (ParameterSpace::declare_state, ABI 9): declared by their state_dict names, changed by a training
// forward as PyTorch changes them, averaged over sync replicas (which end identical), kept by
// checkpoints and a resume, loaded by --init-from from a state_dict with an I64 batch count, and
// kept by parameter servers (central: averaged as sync; async: each push's change added).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/core/temp_dir.h"
#include "tests/models/torch/reference_batch.h"
#include "tests/models/torch/torch_jobs.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/ps/ps_fixture.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/library/trainer_registry.h"
#include "trainers/optim/param_init.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using Json = nlohmann::json;
using troupe::testing::relative_difference;

namespace {

const std::string kFixtures = TROUPE_TORCH_FIXTURE_DIR;
const std::string kModule = kFixtures + "/small_bn_cnn.pt";

struct Made {
  std::unique_ptr<Trainer> trainer;
  ParameterSpace space;
};

// The torchscript trainer set up on the BatchNorm module for 1x8x8 inputs of 4 classes.
Made make() {
  Made m;
  auto t = trainer_registry().create("torchscript");
  REQUIRE(t.ok());
  m.trainer = std::move(*t);
  TrainerContext ctx;
  ctx.data.features = 64;
  ctx.data.classes = 4;
  ctx.config.set("file", kModule);
  ctx.config.set("input_shape", "1,8,8");
  Status st = m.trainer->setup(ctx, m.space);
  INFO(st.to_string());
  REQUIRE(st.ok());
  REQUIRE(m.space.status().ok());
  return m;
}

// Block `name`'s values in `flat`.
std::vector<float> block(const ParameterSpace& space, const std::vector<float>& flat, const std::string& name) {
  for (const ParamBlock& b : space.blocks())
    if (b.name == name) return std::vector<float>(flat.begin() + b.param.offset, flat.begin() + b.param.offset + b.param.numel);
  FAIL("no block " << name);
  return {};
}

TrainOptions blob_job() {
  TrainOptions o = troupe::testing::torch_sgd_job("torchscript", {"file=" + kModule, "input_shape=1,8,8"}, 2);
  o.weight_decay = 0.01f;  // must not decay the running statistics
  o.clip_grad_norm = 1.0f;  // nor scale them
  return o;
}

const std::vector<std::string> kBuffers{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"};

}  // namespace

TEST_CASE("torch buffers: BatchNorm's buffers are state blocks by their state_dict names, and a training step "
          "hands the runtime PyTorch's change of them", "[torch][buffers]") {
  Made m = make();
  std::vector<std::string> names;
  for (const ParamBlock& b : m.space.blocks()) {
    names.push_back(b.name);
    CHECK(b.state == (b.name.find("running") != std::string::npos || b.name.find("num_batches") != std::string::npos));
  }
  CHECK(names == std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc.weight", "fc.bias",
                                          "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"});
  CHECK(m.space.blocks().back().shape.empty());  // a scalar, as PyTorch keeps it
  CHECK(m.trainer->describe().find("6 tensors, 3 buffers") != std::string::npos);

  std::ifstream in(kFixtures + "/small_bn_cnn.json");
  REQUIRE(in.good());
  const Json ref = Json::parse(in);
  std::vector<float> params(m.space.size()), grads(m.space.size(), 0.0f);
  init_parameters(m.space, 1, params.data());
  CHECK(block(m.space, params, "bn.running_var") == std::vector<float>(4, 1.0f));
  const troupe::testing::ReferenceBatch reference(ref);
  const Batch& batch = reference.batch;
  Gradients g(grads.data(), grads.size());
  auto stats = m.trainer->forward_backward(batch, Parameters(params.data(), params.size()), g);
  INFO(stats.status().to_string());
  REQUIRE(stats.ok());
  CHECK(stats->loss == Approx(ref.at("loss").get<double>()).epsilon(1e-5));
  for (const auto& [name, want] : ref.at("grads").items()) {
    INFO(name);
    CHECK(relative_difference(block(m.space, grads, name), want.get<std::vector<float>>()) < 1e-5);
  }
  // A state block's slot holds the change: value + change = PyTorch's buffer after the forward.
  for (const std::string& name : kBuffers) {
    std::vector<float> after = block(m.space, params, name);
    const std::vector<float> change = block(m.space, grads, name);
    for (size_t i = 0; i < after.size(); ++i) after[i] += change[i];
    INFO(name);
    CHECK(relative_difference(after, ref.at("buffers").at(name).get<std::vector<float>>()) < 1e-5);
  }
  // The buffers are the runtime's: evaluation reads them from the parameters, not from the module.
  auto a = m.trainer->evaluate(batch, Parameters(params.data(), params.size()));
  REQUIRE(a.ok());
  std::vector<float> shifted = params;
  for (const ParamBlock& b : m.space.blocks())
    if (b.name == "bn.running_mean") shifted[b.param.offset] += 5.0f;
  auto b = m.trainer->evaluate(batch, Parameters(shifted.data(), shifted.size()));
  REQUIRE(b.ok());
  CHECK(a->loss != b->loss);
}

TEST_CASE("torch buffers: sync replicas average the buffers' changes and end identical, and a still model's running "
          "mean is one process's on the global batch", "[torch][buffers][sync]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  const Made m = make();
  TrainOptions o = blob_job();
  for (ShardStage stage : {ShardStage::none, ShardStage::gradients}) {
    auto run = troupe::testing::run_stage(2, o, train, test, stage, 256);
    INFO("--shard " << shard_stage_name(stage) << ": " << run.errors());
    REQUIRE(run.all_ok());
    CHECK(run.identical());
    CHECK(run.results[0].test_accuracy >= 0.9);
    CHECK(block(m.space, run.params[0], "bn.num_batches_tracked") == std::vector<float>{20.0f});  // 2 epochs of 10
    CHECK(block(m.space, run.params[0], "bn.running_var") != std::vector<float>(4, 1.0f));
  }
  // With parameters that do not move, averaging the changes of two halves gives the running mean of
  // the whole batch (the mean is linear in the rows); the variance differs by the halves' spread.
  o.lr = 1e-30f;
  o.momentum = 0;
  o.weight_decay = 0;
  std::vector<float> one;
  REQUIRE(train_with_trainer(o, train, test, {}, &one).ok());
  auto two = troupe::testing::run_replica_threads(2, o, train, test, nullptr);
  REQUIRE(two.all_ok());
  CHECK(relative_difference(block(m.space, two.params[0], "bn.running_mean"), block(m.space, one, "bn.running_mean")) <
        1e-5);
  CHECK(block(m.space, two.params[0], "bn.num_batches_tracked") == block(m.space, one, "bn.num_batches_tracked"));
  CHECK(relative_difference(block(m.space, two.params[0], "bn.running_var"), block(m.space, one, "bn.running_var")) <
        0.2);
}

TEST_CASE("torch buffers: a sync job's checkpoint keeps them, and the resumed job ends where the uninterrupted one "
          "does", "[torch][buffers][checkpoint]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  const Made m = make();
  const TrainOptions o = blob_job();
  auto whole = troupe::testing::run_replica_threads(2, o, train, test, nullptr);
  REQUIRE(whole.all_ok());

  testing::TempDir dir;
  std::atomic<bool> cancel{false};
  std::vector<checkpoint::Manifest> committed;
  auto stopped = troupe::testing::run_replica_threads(2, o, train, test, [&](int rank, Replica& r, TrainOptions&) {
    r.checkpoints.every = 7;
    r.checkpoints.dir = dir.path();
    r.cancel = &cancel;
    if (rank == 0) r.checkpoints.commit = [&](const checkpoint::Manifest& man) {
      committed.push_back(man);
      cancel = true;
      return Status{};
    };
  });
  REQUIRE(committed.size() == 1);
  auto state = checkpoint::load_checkpoint(committed[0]);
  REQUIRE(state.ok());
  CHECK(block(m.space, state->params, "bn.num_batches_tracked") == std::vector<float>{7.0f});
  CHECK(block(m.space, state->params, "bn.running_var") != std::vector<float>(4, 1.0f));

  auto resumed = troupe::testing::run_replica_threads(2, o, train, test, [&](int, Replica& r, TrainOptions&) {
    r.resume = &*state;
  });
  INFO(resumed.errors());
  REQUIRE(resumed.all_ok());
  CHECK(resumed.identical());
  for (const std::string& name : kBuffers) {
    INFO(name);
    CHECK(relative_difference(block(m.space, resumed.params[0], name), block(m.space, whole.params[0], name)) < 1e-5);
  }
  CHECK(relative_difference(resumed.params[0], whole.params[0]) < 1e-5);
}

TEST_CASE("torch buffers: --init-from loads a state_dict's buffers, its batch count stored as I64", "[torch][buffers]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  const Made m = make();
  TrainOptions o = blob_job();
  o.init_from = kFixtures + "/small_bn_cnn_state.safetensors";
  o.max_steps = 1;
  o.epochs = 1;
  o.lr = 1e-30f;
  o.momentum = 0;
  o.weight_decay = 0;
  std::vector<float> params;
  auto r = train_with_trainer(o, train, test, {}, &params);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  // The file's count (the module's 0 + 1: make_torch_fixtures.py) and one step here.
  CHECK(block(m.space, params, "bn.num_batches_tracked") == std::vector<float>{2.0f});
  for (float v : block(m.space, params, "bn.running_var")) CHECK(v >= 0.9f * 1.5f);  // the file's: 1.5, 0.9 of it kept
  // The parameters are the file's (the module's + 0.1), unmoved by a vanishing rate.
  std::vector<float> module(m.space.size());
  init_parameters(m.space, 1, module.data());
  std::vector<float> want = block(m.space, module, "conv.weight");
  for (float& v : want) v += 0.1f;
  CHECK(relative_difference(block(m.space, params, "conv.weight"), want) < 1e-6);
}

TEST_CASE("torch buffers: parameter servers keep them: central averages the workers' changes, async adds each "
          "push's", "[torch][buffers][ps]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  const Made m = make();
  TrainOptions o = blob_job();
  o.clip_grad_norm = 0;  // central clips on one server only; the shapes below use two
  o.lr = 1e-30f;         // still parameters: central's running mean is one process's
  o.momentum = 0;
  o.weight_decay = 0;
  std::vector<float> one;
  REQUIRE(train_with_trainer(o, train, test, {}, &one).ok());
  const DataSpec data{train.features(), train.classes};
  ps::PsJob central = ps::start_ps_job(o, data, ps::ps_shape(ps::PsMode::central, 2, train.count));
  ps::WorkerRuns run = ps::run_ps_workers(central, 2, o, train, test, /*want_params=*/true);
  for (const Status& st : run.status) REQUIRE(st.ok());
  CHECK(run.params[1] == run.params[0]);
  CHECK(block(m.space, run.params[0], "bn.num_batches_tracked") == block(m.space, one, "bn.num_batches_tracked"));
  CHECK(relative_difference(block(m.space, run.params[0], "bn.running_mean"), block(m.space, one, "bn.running_mean")) <
        1e-5);

  ps::PsJob async = ps::start_ps_job(o, data, ps::ps_shape(ps::PsMode::async, 2, train.count), "job-1");
  ps::WorkerRuns pushed = ps::run_ps_workers(async, 2, o, train, test, /*want_params=*/true);
  for (const Status& st : pushed.status) REQUIRE(st.ok());
  // Every push's +1 on the servers: the worker that finished last pulled them all.
  const float steps = block(m.space, one, "bn.num_batches_tracked")[0];
  const float seen = std::max(block(m.space, pushed.params[0], "bn.num_batches_tracked")[0],
                              block(m.space, pushed.params[1], "bn.num_batches_tracked")[0]);
  CHECK(seen == 2 * steps);
}
