// Pipeline parallelism (trainers/pipeline/): pipelines of 2 and 4 stages, with and without data
// parallelism, under GPipe and 1F1B, hold the parameters one process holds after training on the
// same global batch for the same steps; layers are partitioned by bytes and FLOPs or as asked;
// each stage holds about 1/K of the model's parameters, gradients and optimizer state; a pipeline
// stopped after a checkpoint and resumed from it (each stage reading its own shard) ends bit for bit
// where an uninterrupted one ends, and resumes from a sync job's checkpoint too; bad input
// (more stages than layers, micro-batches that do not divide the batch, a trainer without layers)
// is a clear error.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdio>

#include "kernels/cpu/ops.h"
#include "tests/core/temp_dir.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "trainers/optim/param_init.h"
#include "trainers/pipeline/local_pipeline.h"
#include "trainers/pipeline/partition.h"
#include "trainers/pipeline/schedule.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using namespace troupe::pipeline;
using troupe::testing::relative_difference;

namespace {

const Dataset& fashion(Split split) {
  static const Dataset train = [] {
    auto d = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
    return d.ok() ? std::move(*d) : Dataset{};
  }();
  static const Dataset test = [] {
    auto d = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::test);
    return d.ok() ? std::move(*d) : Dataset{};
  }();
  return split == Split::train ? train : test;
}

TrainOptions four_layer_job() {
  TrainOptions o;
  o.hidden = {128, 64, 32};  // 4 dense layers
  o.epochs = 1;
  o.max_steps = 30;
  o.batch_size = 128;
  o.seed = 5;
  o.evaluate_each_epoch = false;
  return o;
}

std::vector<LayerInfo> dense_layers(const std::vector<int>& dims) {
  std::vector<LayerInfo> out;
  size_t at = 0;
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    const size_t w = static_cast<size_t>(dims[l]) * dims[l + 1], b = static_cast<size_t>(dims[l + 1]);
    LayerInfo info{"dense" + std::to_string(l), {Param{int(2 * l), at, w}, Param{int(2 * l + 1), at + w, b}},
                   dims[l + 1], 0};
    at += w + b;
    out.push_back(info);
  }
  return out;
}

// A trainer that cannot be split: Trainer::layers() stays null.
class NoLayers final : public Trainer {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    w_ = space.declare("w", {ctx.data.features, ctx.data.classes}, Init::zeros());
    return {};
  }
  Expected<BatchStats> forward_backward(const Batch&, const Parameters&, Gradients&) override { return BatchStats{}; }
  Expected<BatchStats> evaluate(const Batch&, const Parameters&) override { return BatchStats{}; }

 private:
  Param w_;
};
TROUPE_REGISTER_TRAINER("test-no-layers", NoLayers);

// A user's model written against the public API only: three tanh layers of its own (not the MLP's
// code), declaring its layer boundaries so it can be pipelined; forward_backward runs the same
// layers in one piece for local training.
class TanhChain final : public Trainer, public LayerModel {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    dims_ = {static_cast<int>(ctx.data.features), 48, 24, ctx.data.classes};
    for (int l = 0; l < 3; ++l) {
      w_.push_back(space.declare("w" + std::to_string(l), {dims_[l], dims_[l + 1]}, Init::normal(0.2f)));
      b_.push_back(space.declare("b" + std::to_string(l), {dims_[l + 1]}, Init::constant(0.01f)));
    }
    return {};
  }
  LayerModel* layers() override { return this; }
  std::vector<LayerInfo> layer_infos() const override {
    std::vector<LayerInfo> out;
    for (int l = 0; l < 3; ++l) out.push_back({"tanh" + std::to_string(l), {w_[l], b_[l]}, dims_[l + 1], 0});
    return out;
  }
  Status forward_layer(int l, const float* in, int64_t rows, const Parameters& p, float* out) override {
    kernels::cpu::matmul(false, false, int(rows), dims_[l + 1], dims_[l], 1.0f, in, p[w_[l]], 0.0f, out);
    kernels::cpu::bias_act(out, p[b_[l]], int(rows), dims_[l + 1], false);
    if (l < 2)
      for (int64_t i = 0; i < rows * dims_[l + 1]; ++i) out[i] = std::tanh(out[i]);
    return {};
  }
  Status backward_layer(int l, const float* in, const float* out, float* dout, int64_t rows, const Parameters& p,
                        Gradients& g, float* din) override {
    const int n = dims_[l + 1];
    if (l < 2)
      for (int64_t i = 0; i < rows * n; ++i) dout[i] *= 1.0f - out[i] * out[i];
    for (int64_t r = 0; r < rows; ++r)
      for (int j = 0; j < n; ++j) g[b_[l]][j] += dout[r * n + j];
    kernels::cpu::matmul(true, false, dims_[l], n, int(rows), 1.0f, in, dout, 1.0f, g[w_[l]]);
    if (din) kernels::cpu::matmul(false, true, int(rows), dims_[l], n, 1.0f, dout, p[w_[l]], 0.0f, din);
    return {};
  }
  Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) override {
    BatchStats s{0, 0};
    s.loss = kernels::cpu::softmax_xent(out, labels, int(rows), dims_[3], dout, &s.correct);
    return s;
  }
  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& p, Gradients& g) override {
    forward(batch, p);
    std::vector<float> d(acts_[2].size()), dprev;
    auto s = output_loss(acts_[2].data(), batch.labels, batch.size, d.data());
    for (int l = 2; l >= 0; --l) {
      dprev.assign(static_cast<size_t>(batch.size) * dims_[l], 0.0f);
      const float* in = l == 0 ? batch.inputs : acts_[l - 1].data();
      TROUPE_RETURN_IF_ERROR(backward_layer(l, in, acts_[l].data(), d.data(), batch.size, p, g, l ? dprev.data() : nullptr));
      d.swap(dprev);
    }
    return s;
  }
  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& p) override {
    forward(batch, p);
    return output_loss(acts_[2].data(), batch.labels, batch.size, nullptr);
  }

 private:
  void forward(const Batch& batch, const Parameters& p) {
    acts_.resize(3);
    const float* in = batch.inputs;
    for (int l = 0; l < 3; ++l) {
      acts_[l].resize(static_cast<size_t>(batch.size) * dims_[l + 1]);
      REQUIRE(forward_layer(l, in, batch.size, p, acts_[l].data()).ok());
      in = acts_[l].data();
    }
  }
  std::vector<int> dims_;
  std::vector<Param> w_, b_;
  std::vector<std::vector<float>> acts_;
};
TROUPE_REGISTER_TRAINER("test-tanh-chain", TanhChain);

}  // namespace

TEST_CASE("pipeline: the balanced partition cuts by bytes and FLOPs, explicit counts are kept", "[pipeline]") {
  const auto layers = dense_layers({784, 1024, 1024, 512, 256, 10});
  auto plans = partition_layers(layers, 784, 4);
  REQUIRE(plans.ok());
  REQUIRE(plans->size() == 4);
  // The two 1024-wide layers are the heaviest: each gets a stage; the small tail shares one.
  CHECK((*plans)[0].end_layer == 1);
  CHECK((*plans)[1].end_layer == 2);
  CHECK((*plans)[2].end_layer == 3);
  CHECK((*plans)[3].end_layer == 5);
  CHECK((*plans)[0].begin == 0);
  CHECK((*plans)[3].end == layers.back().params.back().offset + layers.back().params.back().numel);
  for (size_t s = 1; s < 4; ++s) {
    CHECK((*plans)[s].begin == (*plans)[s - 1].end);
    CHECK((*plans)[s].in_features == (*plans)[s - 1].out_features);
  }
  auto given = partition_layers(layers, 784, 2, {3, 2});
  REQUIRE(given.ok());
  CHECK((*given)[0].end_layer == 3);
  CHECK((*given)[1].first_layer == 3);
}

TEST_CASE("pipeline: more stages than layers and bad stage-layers are clear errors", "[pipeline][errors]") {
  const auto layers = dense_layers({784, 64, 10});
  auto too_many = partition_layers(layers, 784, 3);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message().find("--stages 3 is more stages than the model has layers (2)") != std::string::npos);
  auto bad_sum = partition_layers(dense_layers({784, 64, 32, 10}), 784, 2, {1, 1});
  REQUIRE_FALSE(bad_sum.ok());
  CHECK(bad_sum.status().message().find("summing to 3") != std::string::npos);
  CHECK_FALSE(parse_stage_layers("2,x").ok());
  CHECK_FALSE(parse_stage_layers("2,0").ok());
  auto gap = dense_layers({4, 4, 4});
  gap[1].params[0].offset += 1;
  CHECK(check_layers(gap).message().find("layer 1 ('dense1')'s blocks are not where") != std::string::npos);
}

TEST_CASE("pipeline: schedules run every pass once and 1F1B keeps at most K-s micro-batches", "[pipeline]") {
  for (Schedule sch : {Schedule::gpipe, Schedule::one_f_one_b})
    for (int s = 0; s < 4; ++s) {
      const auto ops = stage_ops(sch, s, 4, 8);
      REQUIRE(ops.size() == 16);
      int in_flight = 0, most = 0, next_f = 0, next_b = 0;
      for (const PipeOp& op : ops) {
        if (op.forward) CHECK(op.micro == next_f++);
        else CHECK(op.micro == next_b++);
        in_flight += op.forward ? 1 : -1;
        most = std::max(most, in_flight);
      }
      CHECK(most == stash_slots(sch, s, 4, 8));
    }
  CHECK(stash_slots(Schedule::one_f_one_b, 0, 4, 8) == 4);
  CHECK(gpipe_bubble_estimate(4, 4) == Approx(3.0 / 7));
}

TEST_CASE("pipeline: a stage's range (or a replica's chunks) of the initial parameters is that of the whole initialisation",
          "[pipeline]") {
  ParameterSpace space;
  space.declare("a", {7, 5}, Init::uniform(0.3f));
  space.declare("b", {5}, Init::constant(0.5f));
  space.declare("c", {9, 3}, Init::normal(0.1f));
  space.declare("d", {3}, Init::zeros());
  std::vector<float> whole(space.size()), part(space.size());
  init_parameters(space, 42, whole.data());
  for (size_t begin : {size_t{0}, size_t{3}, size_t{40}, size_t{50}}) {
    const size_t end = std::min(space.size(), begin + 20);
    init_parameter_range(space, 42, begin, end, part.data());
    for (size_t i = begin; i < end; ++i) REQUIRE(part[i - begin] == whole[i]);
  }
  // Several ranges at once, each float at its own index (a sharded replica's chunks); the rest untouched.
  std::vector<float> chunks(space.size(), -7.0f);
  const std::vector<std::pair<size_t, size_t>> ranges = {{2, 9}, {33, 41}, {60, 70}};
  init_parameter_ranges(space, 42, ranges, chunks.data());
  for (size_t i = 0; i < space.size(); ++i) {
    bool inside = false;
    for (const auto& r : ranges) inside = inside || (i >= r.first && i < r.second);
    INFO("float " << i);
    REQUIRE(chunks[i] == (inside ? whole[i] : -7.0f));
  }
}

TEST_CASE("pipeline: 2 and 4 stages, with and without data parallelism, under GPipe and 1F1B, hold the "
          "parameters of one process on the same global batch",
          "[pipeline][equivalence]") {
  REQUIRE(fashion(Split::train).count > 0);
  TrainOptions o = four_layer_job();
  std::vector<float> want;
  REQUIRE(train_with_trainer(o, fashion(Split::train), fashion(Split::test), {}, &want).ok());
  for (int stages : {2, 4})
    for (int replicas : {1, 2})
      for (const char* schedule : {"gpipe", "1f1b"}) {
        PipelineOptions po;
        po.stages = stages;
        po.workers = stages * replicas;
        po.microbatches = 4;
        po.schedule = schedule;
        auto run = train_local_pipeline(o, po, fashion(Split::train), fashion(Split::test));
        INFO(stages << " stages x " << replicas << " replicas, " << schedule << ": "
                    << (run.ok() ? std::string("ok") : run.status().to_string()));
        REQUIRE(run.ok());
        REQUIRE(run->params.size() == want.size());
        const double diff = relative_difference(run->params, want);
        INFO("relative difference " << diff);
        CHECK(diff <= 1e-5);
        CHECK(run->train.steps == 30);
        CHECK(run->train.test_accuracy > 0.5);
      }
}

TEST_CASE("pipeline: a user's trainer that declares its layers is pipelined and matches its local training",
          "[pipeline][equivalence][api]") {
  const Dataset train = blobs(1024, 5, 6, 1), test = blobs(200, 5, 6, 2);
  TrainOptions o;
  o.model = "test-tanh-chain";
  o.epochs = 2;
  o.batch_size = 64;
  o.seed = 3;
  std::vector<float> want;
  auto local = train_with_trainer(o, train, test, {}, &want);
  REQUIRE(local.ok());
  for (int stages : {2, 3}) {
    PipelineOptions po;
    po.stages = stages;
    po.workers = 2 * stages;
    po.microbatches = 4;
    auto run = train_local_pipeline(o, po, train, test);
    INFO(stages << " stages: " << (run.ok() ? std::string("ok") : run.status().to_string()));
    REQUIRE(run.ok());
    const double diff = relative_difference(run->params, want);
    INFO("relative difference " << diff);
    CHECK(diff <= 1e-5);
    CHECK(run->train.test_accuracy == Approx(local->test_accuracy).margin(0.01));
    // The test loss too, summed over the replicas' last stages (one process's, to float rounding).
    CHECK(run->train.test_loss > 0);
    CHECK(run->train.test_loss == Approx(local->test_loss).epsilon(1e-3));
  }
}

TEST_CASE("pipeline: a regression (--loss mse) through 2 and 3 stages, both schedules, holds one process's "
          "parameters and test loss", "[pipeline][equivalence][targets]") {
  const Dataset train = linear_values(1024, 5), test = linear_values(200, 6);
  TrainOptions o;
  o.loss = "mse";
  o.hidden = {32, 16};
  o.epochs = 2;
  o.batch_size = 64;
  o.seed = 9;
  o.lr = 0.01f;
  std::vector<float> want;
  auto local = train_with_trainer(o, train, test, {}, &want);
  REQUIRE(local.ok());
  for (int stages : {2, 3})
    for (const char* schedule : {"gpipe", "1f1b"}) {
      PipelineOptions po;
      po.stages = stages;
      po.workers = 2 * stages;
      po.microbatches = 4;
      po.schedule = schedule;
      auto run = train_local_pipeline(o, po, train, test);
      INFO(stages << " stages, " << schedule << ": " << (run.ok() ? std::string("ok") : run.status().to_string()));
      REQUIRE(run.ok());
      const double diff = relative_difference(run->params, want);
      INFO("relative difference " << diff);
      CHECK(diff <= 1e-5);
      CHECK(run->train.test_accuracy == -1);
      CHECK(run->train.test_loss == Approx(local->test_loss).epsilon(1e-4));
    }
  double zero_loss = 0;  // predicting 0 everywhere: the targets' mean square
  for (float t : test.targets) zero_loss += static_cast<double>(t) * t / static_cast<double>(test.targets.size());
  CHECK(local->test_loss < 0.5 * zero_loss);  // y = x A + b is being learned
}

TEST_CASE("pipeline: GPipe and 1F1B apply bit-identical updates", "[pipeline][equivalence]") {
  REQUIRE(fashion(Split::train).count > 0);
  TrainOptions o = four_layer_job();
  o.optimizer = "sgd";
  PipelineOptions po;
  po.stages = 4;
  po.microbatches = 8;
  po.schedule = "gpipe";
  auto gpipe = train_local_pipeline(o, po, fashion(Split::train), fashion(Split::test));
  po.schedule = "1f1b";
  auto one_f_one_b = train_local_pipeline(o, po, fashion(Split::train), fashion(Split::test));
  REQUIRE(gpipe.ok());
  REQUIRE(one_f_one_b.ok());
  CHECK(gpipe->params == one_f_one_b->params);
}

TEST_CASE("pipeline: each of K stages holds about 1/K of the parameters, gradients and optimizer state",
          "[pipeline][memory]") {
  // Four equal 64x64 layers: a balanced cut gives each stage exactly one.
  const Dataset train = blobs(512, 64, 8, 1), test = blobs(128, 64, 8, 2);
  TrainOptions o;
  o.hidden = {64, 64, 64};
  o.epochs = 1;
  o.batch_size = 64;
  for (int stages : {2, 4}) {
    PipelineOptions po;
    po.stages = stages;
    po.microbatches = 2;
    auto run = train_local_pipeline(o, po, train, test);
    REQUIRE(run.ok());
    double total = 0;
    for (const StageReport& r : run->stages) {
      INFO("stage " << r.stage << " of " << stages << ": " << r.memory_fraction() << " of the model's bytes");
      CHECK(r.memory_fraction() == Approx(1.0 / stages).margin(0.01));
      CHECK(r.optimizer_bytes == 2 * r.param_bytes);  // adam: m and v, for its range only
      total += r.memory_fraction();
    }
    CHECK(total == Approx(1.0).margin(0.01));
  }
}

TEST_CASE("pipeline: micro-batches that do not divide the batch, workers not a multiple of stages and a "
          "trainer without layers are clear errors",
          "[pipeline][errors]") {
  const Dataset train = blobs(256, 4, 4, 1), test = blobs(64, 4, 4, 2);
  TrainOptions o;
  o.hidden = {8, 8};
  o.epochs = 1;
  o.batch_size = 100;
  PipelineOptions po;
  po.stages = 2;
  po.microbatches = 8;
  auto r = train_local_pipeline(o, po, train, test);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "--batch-size 100 (the global batch) does not divide into 1 replica(s) x 8 "
                                "micro-batches; use a multiple of 8 or other --microbatches");
  po.microbatches = 4;
  po.workers = 3;
  r = train_local_pipeline(o, po, train, test);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("--workers 3 is not a multiple of --stages 2") != std::string::npos);
  po.workers = 0;
  po.stages = 4;
  r = train_local_pipeline(o, po, train, test);  // 3 layers
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("--stages 4 is more stages than the model has layers (3)") != std::string::npos);
  po.stages = 2;
  o.model = "test-no-layers";
  r = train_local_pipeline(o, po, train, test);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("does not declare its layers") != std::string::npos);
}

TEST_CASE("pipeline: stopped after its checkpoint and resumed from it, a pipeline ends bit for bit where an "
          "uninterrupted one ends",
          "[pipeline][checkpoint][resume]") {
  const Dataset train = blobs(640, 6, 4, 41), test = blobs(128, 6, 4, 42);
  TrainOptions o;
  o.hidden = {24, 16};  // 3 dense layers: one per stage
  o.epochs = 3;         // 20 steps an epoch
  o.batch_size = 32;
  o.seed = 9;
  o.optimizer = "adam";  // optimizer state and the schedule's step must come back too
  o.lr = 0.01f;
  o.lr_schedule = "cosine";
  PipelineOptions po;
  po.stages = 3;
  po.workers = 6;  // 2 replicas
  po.microbatches = 2;
  auto whole = train_local_pipeline(o, po, train, test);
  REQUIRE(whole.ok());
  REQUIRE(whole->train.steps == 60);

  SECTION("from its own checkpoint, each stage reading its shard") {
    for (int64_t at : {27, 40}) {  // in the middle of epoch 2; at its end
      troupe::testing::TempDir dir;
      std::atomic<bool> cancel{false};
      std::vector<checkpoint::Manifest> committed;
      LocalCheckpoints first;
      first.every = at;
      first.dir = dir.path();
      first.cancel = &cancel;
      first.commit = [&](const checkpoint::Manifest& m) {
        committed.push_back(m);
        cancel = true;  // the "crash": every stage stops before its next step
        return Status{};
      };
      auto stopped = train_local_pipeline(o, po, train, test, {}, std::chrono::seconds(20), first);
      INFO("checkpoint at step " << at << ": " << stopped.status().to_string());
      REQUIRE_FALSE(stopped.ok());
      REQUIRE(committed.size() == 1);
      const checkpoint::Manifest& m = committed[0];
      CHECK(m.step == at);
      REQUIRE(m.shards.size() == 3);  // one shard per stage, tiling the model
      for (int s = 0; s < 3; ++s) {
        auto shard = checkpoint::read_shard_file(m.shards[static_cast<size_t>(s)].path);
        REQUIRE(shard.ok());
        CHECK(shard->header.begin == whole->stages[static_cast<size_t>(s)].begin);
        CHECK(shard->header.end == whole->stages[static_cast<size_t>(s)].end);
      }
      LocalCheckpoints resume;
      resume.resume = &m;
      auto rest = train_local_pipeline(o, po, train, test, {}, std::chrono::seconds(20), resume);
      REQUIRE(rest.ok());
      CHECK(rest->train.steps == 60);
      CHECK(rest->params == whole->params);
      CHECK(rest->train.test_accuracy == whole->train.test_accuracy);
      CHECK(rest->train.test_loss == whole->train.test_loss);
    }
  }

  SECTION("a one-process job's checkpoint (another layout: one shard) resumes a pipeline") {
    troupe::testing::TempDir dir;
    std::atomic<bool> cancel{false};
    std::vector<checkpoint::Manifest> committed;
    Replica one;
    one.checkpoints.every = 27;
    one.checkpoints.dir = dir.path();
    one.cancel = &cancel;
    one.checkpoints.commit = [&](const checkpoint::Manifest& m) {
      committed.push_back(m);
      cancel = true;
      return Status{};
    };
    REQUIRE_FALSE(train_replica(o, train, test, one).ok());
    REQUIRE(committed.size() == 1);
    LocalCheckpoints resume;
    resume.resume = &committed[0];
    auto rest = train_local_pipeline(o, po, train, test, {}, std::chrono::seconds(20), resume);
    REQUIRE(rest.ok());
    CHECK(rest->train.steps == 60);
    const double diff = relative_difference(rest->params, whole->params);
    INFO("relative difference " << diff);
    CHECK(diff <= 1e-5);  // one process and a pipeline agree to rounding (the equivalence test)
  }
}
