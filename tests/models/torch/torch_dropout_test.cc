// A torch module that draws in its training forward (nn.Dropout): what it draws follows the job's
// seed and the batch (models/torch/batch_randomness.h), not what the process ran before. So a step
// trained again — by a restarted or replaced worker, in another process — drops the same units, and
// replicas side by side in one process, sharing libtorch's one generator, end the same run after
// run; the same for a pipeline's stages, which draw per layer.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/models/torch/torch_jobs.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/library/bundled_models.h"
#include "trainers/library/trainer_registry.h"
#include "trainers/optim/param_init.h"
#include "trainers/pipeline/local_pipeline.h"

using namespace troupe;

namespace {

std::string fixture(const std::string& name) { return std::string(TROUPE_TORCH_FIXTURE_DIR) + "/" + name; }

// dropout_mlp.pt (flatten, linear 64-16, relu, dropout 0.5, linear 16-4) set up with `seed`.
struct DropoutModel {
  explicit DropoutModel(uint64_t seed) {
    INFO("bundled models in " << bundled_models_dir());
    auto t = trainer_registry().create("torchscript");
    REQUIRE(t.ok());
    trainer = std::move(*t);
    TrainerContext ctx;
    ctx.data.features = 64;
    ctx.data.classes = 4;
    ctx.seed = seed;
    ctx.config.set("file", fixture("dropout_mlp.pt"));
    ctx.config.set("input_shape", "1,8,8");
    const Status s = trainer->setup(ctx, space);
    INFO(s.to_string());
    REQUIRE(s.ok());
    params.resize(space.size());
    init_parameters(space, 1, params.data());
  }

  // One training step's loss and gradients on `batch`.
  std::pair<float, std::vector<float>> step(const Batch& batch) {
    std::vector<float> grads(space.size(), 0.0f);
    Gradients g(grads.data(), grads.size(), nullptr);
    auto stats = trainer->forward_backward(batch, Parameters(params.data(), params.size()), g);
    INFO(stats.status().to_string());
    REQUIRE(stats.ok());
    return {stats->loss, grads};
  }

  std::unique_ptr<Trainer> trainer;
  ParameterSpace space;
  std::vector<float> params;
};

struct Rows {
  explicit Rows(const Dataset& d, int64_t first, int64_t n) {
    x.assign(d.images.begin() + first * 64, d.images.begin() + (first + n) * 64);
    y.assign(d.labels.begin() + first, d.labels.begin() + first + n);
    batch.inputs = x.data();
    batch.labels = y.data();
    batch.size = n;
    batch.features = 64;
  }
  std::vector<float> x;
  std::vector<int32_t> y;
  Batch batch;
};

TrainOptions dropout_job(int epochs) {
  TrainOptions o =
      troupe::testing::torch_sgd_job("torchscript", {"file=" + fixture("dropout_mlp.pt"), "input_shape=1,8,8"}, epochs);
  o.evaluate_each_epoch = false;
  return o;
}

}  // namespace

TEST_CASE("torch dropout: a training step's mask follows the job's seed and the batch, whatever the process drew "
          "before", "[torch][dropout]") {
  const Dataset data = blobs(64, 4, 8, 3);
  const Rows a(data, 0, 24), b(data, 24, 24);
  DropoutModel m(3);
  const auto first = m.step(a.batch);
  // Dropout is on in training: the step's loss is not the evaluation's.
  auto eval = m.trainer->evaluate(a.batch, Parameters(m.params.data(), m.params.size()));
  REQUIRE(eval.ok());
  CHECK(first.first != eval->loss);

  m.step(b.batch);
  m.step(b.batch);
  const auto again = m.step(a.batch);  // after other draws: the same units dropped
  CHECK(again.first == first.first);
  CHECK(again.second == first.second);

  DropoutModel fresh(3);  // a replacement worker: a new trainer, the same step
  fresh.step(b.batch);
  const auto replaced = fresh.step(a.batch);
  CHECK(replaced.second == first.second);

  DropoutModel other(4);  // another seed, another mask
  CHECK(other.step(a.batch).second != first.second);
  CHECK(m.step(b.batch).second != first.second);  // another batch, another mask
}

TEST_CASE("torch dropout: 4 sync replicas in one process end byte-identical run after run, and a 2-stage pipeline "
          "too", "[torch][dropout][sync]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  const TrainOptions o = dropout_job(3);
  auto first = troupe::testing::run_replica_threads(4, o, train, test, nullptr);
  auto second = troupe::testing::run_replica_threads(4, o, train, test, nullptr);
  INFO(first.errors() << second.errors());
  REQUIRE(first.all_ok());
  REQUIRE(second.all_ok());
  CHECK(first.identical());
  CHECK(first.params[0] == second.params[0]);
  CHECK(first.results[0].test_accuracy >= 0.9);

  pipeline::PipelineOptions po;
  po.stages = 2;
  po.workers = 4;  // 2 replicas of 2 stages, 8 threads drawing
  po.microbatches = 4;
  po.schedule = "1f1b";
  auto p1 = pipeline::train_local_pipeline(o, po, train, test);
  auto p2 = pipeline::train_local_pipeline(o, po, train, test);
  INFO((p1.ok() ? std::string("ok") : p1.status().to_string()) << " / "
       << (p2.ok() ? std::string("ok") : p2.status().to_string()));
  REQUIRE(p1.ok());
  REQUIRE(p2.ok());
  CHECK(p1->params == p2->params);
  CHECK(p1->train.test_accuracy >= 0.9);
}
