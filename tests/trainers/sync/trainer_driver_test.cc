// The runtime's loop over a Trainer (train_with_trainer): the built-in MLP through the API gives the
// parameters of the hand-written MLP loop bit for bit, and a trainer's errors, settings and
// declarations reach the user with where they happened.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "kernels/cpu/denormals.h"
#include "trainers/local/local_trainer.h"
#include "trainers/optim/lr_schedule.h"
#include "models/mlp/mlp.h"
#include "trainers/optim/optimizer.h"
#include "trainers/sync/trainer_driver.h"
#include "tests/trainers/blobs.h"

using namespace troupe;

namespace {

// The MLP training loop written out directly over MlpCpu (what train_mlp_cpu was before the trainer
// API): the reference the API path must match bit for bit.
std::vector<float> reference_mlp_params(const TrainOptions& o, const Dataset& train, int64_t steps) {
  std::vector<int> dims{static_cast<int>(train.features())};
  dims.insert(dims.end(), o.hidden.begin(), o.hidden.end());
  dims.push_back(train.classes);
  MlpLayout layout = *MlpLayout::make(dims);
  kernels::cpu::ScopedFlushDenormals flush;
  OptimizerOptions oo;
  oo.name = o.optimizer;
  oo.lr = o.effective_lr();
  oo.momentum = o.momentum;
  oo.weight_decay = o.weight_decay;
  std::unique_ptr<Optimizer> opt = std::move(make_optimizer(oo, layout.param_count).value());
  LrSchedule schedule = LrSchedule::constant;
  parse_lr_schedule(o.lr_schedule, &schedule);
  const int64_t per_epoch = train.count / o.batch_size;
  const int64_t total = std::min<int64_t>(steps, per_epoch * o.epochs);
  std::vector<float> params(layout.param_count), grads(layout.param_count);
  mlp_init(layout, o.seed, params.data());
  MlpCpu model(layout);
  const int64_t f = train.features();
  std::vector<float> x(static_cast<size_t>(o.batch_size) * f);
  std::vector<int32_t> y(o.batch_size);
  int64_t step = 0;
  for (int epoch = 1; step < total; ++epoch) {
    auto order = epoch_permutation(train.count, o.seed, epoch);
    for (int64_t s = 0; s < per_epoch && step < total; ++s) {
      for (int r = 0; r < o.batch_size; ++r) {
        const int32_t idx = order[static_cast<size_t>(s * o.batch_size + r)];
        std::copy_n(train.images.data() + idx * f, f, x.data() + r * f);
        y[r] = train.labels[idx];
      }
      model.forward_backward(params.data(), x.data(), y.data(), o.batch_size, grads.data(), nullptr);
      ++step;
      opt->set_lr(scheduled_lr(schedule, oo.lr, step - 1, total));
      opt->step(params.data(), grads.data());
    }
  }
  return params;
}

// A softmax regression registered in this test binary, as a user's trainer would be; its settings
// make it fail on purpose.
class TestLinear final : public Trainer {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    auto fail_at = ctx.config.get_int("fail_at_step", 0);
    if (!fail_at.ok()) return fail_at.status();
    fail_at_ = *fail_at;
    if (ctx.config.get("declare") == "twice") space.declare("w", {1}, Init::zeros());
    if (ctx.config.get("declare") == "nothing") return {};
    features_ = ctx.data.features;
    classes_ = ctx.data.classes;
    w_ = space.declare("w", {features_, classes_}, Init::normal(0.01f));
    b_ = space.declare("b", {classes_}, Init::zeros());
    return {};
  }
  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& p, Gradients& g) override {
    if (++steps_ == fail_at_) return invalid_argument("the test asked this step to fail");
    return run(batch, p, &g);
  }
  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& p) override { return run(batch, p, nullptr); }

 private:
  BatchStats run(const Batch& batch, const Parameters& p, Gradients* g) {
    BatchStats s;
    s.correct = 0;
    double loss = 0;
    std::vector<double> z(classes_);
    for (int64_t r = 0; r < batch.size; ++r) {
      const float* x = batch.inputs + r * batch.features;
      for (int c = 0; c < classes_; ++c) {
        z[c] = p[b_][c];
        for (int64_t i = 0; i < features_; ++i) z[c] += x[i] * p[w_][i * classes_ + c];
      }
      double mx = z[0];
      int best = 0;
      for (int c = 1; c < classes_; ++c) {
        mx = std::max(mx, z[c]);
        if (z[c] > z[best]) best = c;
      }
      double sum = 0;
      for (double v : z) sum += std::exp(v - mx);
      loss += std::log(sum) - (z[batch.labels[r]] - mx);
      s.correct += best == batch.labels[r];
      if (!g) continue;
      for (int c = 0; c < classes_; ++c) {
        const float d = static_cast<float>((std::exp(z[c] - mx) / sum - (c == batch.labels[r])) / batch.size);
        (*g)[b_][c] += d;
        for (int64_t i = 0; i < features_; ++i) (*g)[w_][i * classes_ + c] += x[i] * d;
      }
    }
    s.loss = static_cast<float>(loss / batch.size);
    return s;
  }
  int64_t fail_at_ = 0, steps_ = 0, features_ = 0;
  int classes_ = 0;
  Param w_, b_;
};
TROUPE_REGISTER_TRAINER("test-linear", TestLinear);

TrainOptions small_job(const std::string& model) {
  TrainOptions o;
  o.model = model;
  o.hidden = {16};
  o.epochs = 3;
  o.batch_size = 20;
  o.lr = 0.01f;
  o.seed = 5;
  return o;
}

}  // namespace

TEST_CASE("the mlp trainer gives the parameters of the plain MLP loop bit for bit", "[trainer_driver][equivalence]") {
  const Dataset train = blobs(400, 4, 5, 1), test = blobs(80, 4, 5, 2);
  for (const char* optimizer : {"adam", "sgd", "adamw"}) {
    TrainOptions o = small_job("mlp");
    o.optimizer = optimizer;
    o.weight_decay = 0.01f;
    o.max_steps = 37;  // into the second epoch: the reshuffle is covered
    std::vector<float> got;
    auto r = train_with_trainer(o, train, test, {}, &got);
    REQUIRE(r.ok());
    CHECK(r->steps == 37);
    const std::vector<float> want = reference_mlp_params(o, train, 37);
    INFO(optimizer);
    REQUIRE(got.size() == want.size());
    CHECK(got == want);
  }
}

TEST_CASE("a trainer registered in the binary trains through the runtime", "[trainer_driver]") {
  const Dataset train = blobs(400, 4, 5, 5), test = blobs(80, 4, 5, 6);
  TrainOptions o = small_job("test-linear");
  o.lr = 0.02f;
  auto r = train_with_trainer(o, train, test);
  REQUIRE(r.ok());
  CHECK(r->model == "test-linear (104 parameters)");
  CHECK(r->history.back().train_loss < r->history.front().train_loss);
  CHECK(r->test_accuracy > 0.9);
}

TEST_CASE("a trainer's errors reach the user with where they happened", "[trainer_driver][errors]") {
  const Dataset train = blobs(100, 2, 3, 7), test = blobs(20, 2, 3, 8);
  TrainOptions o = small_job("test-linear");

  o.trainer_args = {"fail_at_step=7"};
  auto failed = train_with_trainer(o, train, test);
  REQUIRE(!failed.ok());
  CHECK(failed.status().code() == Code::invalid_argument);
  CHECK(failed.status().message() ==
        "trainer 'test-linear': forward_backward at epoch 2, step 2: the test asked this step to fail");

  o.trainer_args = {"fail_at_step=soon"};
  auto bad_setting = train_with_trainer(o, train, test);
  CHECK(bad_setting.status().message() ==
        "trainer 'test-linear': setup: trainer setting 'fail_at_step' = 'soon' is not an integer");

  o.trainer_args = {"declare=twice"};
  auto twice = train_with_trainer(o, train, test);
  CHECK(twice.status().message().find("parameter 'w': declared twice") != std::string::npos);

  o.trainer_args = {"declare=nothing"};
  auto nothing = train_with_trainer(o, train, test);
  CHECK(nothing.status().message() == "trainer 'test-linear' declared no parameters in setup()");

  o.trainer_args = {"novalue"};
  CHECK(train_with_trainer(o, train, test).status().message().find("--trainer-arg") == 0);

  TrainOptions unknown = small_job("nosuch");
  auto u = train_with_trainer(unknown, train, test);
  CHECK(u.status().code() == Code::invalid_argument);
  CHECK(u.status().message().find("--model 'nosuch' is not a known trainer; known: ") == 0);

  TrainOptions mlp = small_job("mlp");
  mlp.trainer_args = {"hidden=8,-1"};
  CHECK(train_with_trainer(mlp, train, test).status().message().find("layer size -1") != std::string::npos);
}
