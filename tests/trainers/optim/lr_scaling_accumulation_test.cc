// Options of large-batch training: linear learning-rate scaling, warm-up, and gradient
// accumulation (the same update as one batch, from micro-batches), alone and with sync replicas.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include "collectives/inproc_transport.h"
#include "tests/trainers/blobs.h"
#include "trainers/optim/lr_schedule.h"
#include "trainers/sync/micro_batches.h"
#include "trainers/sync/trainer_driver.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;

using troupe::testing::relative_difference;

namespace {

TrainOptions small() {
  TrainOptions o;
  o.hidden = {32};
  o.epochs = 3;
  o.batch_size = 40;
  o.seed = 3;
  return o;
}

// A model whose gradient is the mean of the batch's rows, whose loss is the mean label, and which
// counts the rows labelled 0 as correct (or does not count, when told); it records every call.
class RowMeanTrainer final : public Trainer {
 public:
  struct Call {
    const float* inputs;
    int64_t rows;
    float loss_scale;
  };
  Status setup(const TrainerContext&, ParameterSpace&) override { return {}; }
  Expected<BatchStats> forward_backward(const Batch& b, const Parameters&, Gradients& g) override {
    calls.push_back({b.inputs, b.size, b.loss_scale});
    BatchStats st{0.0f, counts ? 0 : -1};
    for (int64_t r = 0; r < b.size; ++r) {
      for (int64_t f = 0; f < b.features; ++f) g.data()[f] += b.inputs[r * b.features + f] / b.size;
      st.loss += static_cast<float>(b.labels[r]) / b.size;
      if (counts && b.labels[r] == 0) ++st.correct;
    }
    if (fail_at >= 0 && static_cast<int>(calls.size()) == fail_at + 1) return numeric_error("part failed");
    return st;
  }
  Expected<BatchStats> evaluate(const Batch&, const Parameters&) override { return BatchStats{}; }
  std::vector<Call> calls;
  bool counts = true;
  int fail_at = -1;
};

}  // namespace

TEST_CASE("forward_backward_parts: K calls on consecutive micro-batches give the batch's mean gradient and loss",
          "[accumulate]") {
  // 8 rows of 2 features: row r = (r, 10 r); labels 0,1,0,1,...
  std::vector<float> inputs;
  std::vector<int32_t> labels;
  for (int r = 0; r < 8; ++r) {
    inputs.push_back(static_cast<float>(r));
    inputs.push_back(10.0f * r);
    labels.push_back(r % 2);
  }
  const Batch batch{inputs.data(), labels.data(), 8, 2, 4.0f};
  std::vector<float> params(2), grads(2, 0.0f), scratch;
  const Parameters p(params.data(), params.size());
  Gradients g(grads.data(), grads.size());
  RowMeanTrainer t;
  auto four = forward_backward_parts(t, batch, p, g, 4, scratch);
  REQUIRE(four.ok());
  REQUIRE(t.calls.size() == 4u);
  for (size_t m = 0; m < 4; ++m) {  // rows 2m, 2m+1, in order, with the batch's loss scale
    CHECK(t.calls[m].inputs == inputs.data() + 4 * m);
    CHECK(t.calls[m].rows == 2);
    CHECK(t.calls[m].loss_scale == 4.0f);
  }
  CHECK(grads[0] == Approx(3.5f));  // mean of 0..7
  CHECK(grads[1] == Approx(35.0f));
  CHECK(four->loss == Approx(0.5f));
  CHECK(four->correct == 4);

  // One part: a single call straight into the gradients, the same result.
  std::vector<float> whole(2, 0.0f);
  Gradients wg(whole.data(), whole.size());
  auto one = forward_backward_parts(t, batch, p, wg, 1, scratch);
  REQUIRE(one.ok());
  CHECK(t.calls.size() == 5u);
  CHECK(whole[0] == Approx(grads[0]));
  CHECK(whole[1] == Approx(grads[1]));
  CHECK(one->loss == Approx(four->loss));

  // A model that does not count: -1, not a sum of -1s. A part that fails fails the step.
  t.counts = false;
  std::fill(grads.begin(), grads.end(), 0.0f);
  auto uncounted = forward_backward_parts(t, batch, p, g, 2, scratch);
  REQUIRE(uncounted.ok());
  CHECK(uncounted->correct == -1);
  t.calls.clear();
  t.fail_at = 1;
  auto failed = forward_backward_parts(t, batch, p, g, 2, scratch);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() == "part failed");

  // A short batch the parts do not divide (an async worker's last of an epoch): micro-batches a row
  // apart in size, weighted by their rows, still give the batch's mean.
  t.counts = true;
  t.fail_at = -1;
  for (int parts : {3, 5, 16}) {
    INFO(parts << " parts");
    t.calls.clear();
    std::fill(grads.begin(), grads.end(), 0.0f);
    auto uneven = forward_backward_parts(t, batch, p, g, parts, scratch);
    REQUIRE(uneven.ok());
    std::vector<int64_t> rows;
    int64_t next = 0;
    for (const auto& c : t.calls) {
      rows.push_back(c.rows);
      CHECK(c.inputs == inputs.data() + 2 * next);  // consecutive
      next += c.rows;
    }
    CHECK(next == 8);
    if (parts == 3) CHECK(rows == std::vector<int64_t>{3, 3, 2});
    if (parts == 5) CHECK(rows == std::vector<int64_t>{2, 2, 2, 1, 1});
    if (parts == 16) CHECK(rows.size() == 8u);  // no empty micro-batches
    CHECK(grads[0] == Approx(3.5f));
    CHECK(grads[1] == Approx(35.0f));
    CHECK(uneven->loss == Approx(0.5f));
    CHECK(uneven->correct == 4);
  }
  CHECK(forward_backward_parts(t, batch, p, g, 0, scratch).status().code() == Code::invalid_argument);
}

TEST_CASE("warm-up ramps the rate linearly, then the schedule runs over the remaining steps", "[lr]") {
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 0, 1000, 10) == Approx(0.01f));
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 4, 1000, 10) == Approx(0.05f));
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 9, 1000, 10) == Approx(0.1f));
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 10, 1000, 10) == Approx(0.1f));          // decay starts
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 505, 1000, 10) == Approx(0.05f));        // halfway through it
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 1000, 1000, 10) == Approx(0.0f).margin(1e-9));
  CHECK(scheduled_lr(LrSchedule::constant, 0.1f, 2, 1000, 4) == Approx(0.075f));
  CHECK(scheduled_lr(LrSchedule::constant, 0.1f, 600, 1000, 4) == Approx(0.1f));
  // No warm-up: exactly the schedule as before.
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 500, 1000, 0) == scheduled_lr(LrSchedule::cosine, 0.1f, 500, 1000));
}

TEST_CASE("linear scaling multiplies the rate by batch / reference batch", "[lr]") {
  TrainOptions o;
  o.lr = 0.01f;
  o.batch_size = 512;
  CHECK(o.effective_lr() == Approx(0.01f));
  o.lr_scaling = "linear";
  o.lr_reference_batch = 128;
  CHECK(o.effective_lr() == Approx(0.04f));
  o.lr = 0;  // the optimizer's default is scaled too
  o.optimizer = "sgd";
  CHECK(o.effective_lr() == Approx(0.2f));
  o.lr_scaling = "sqrt";
  CHECK(o.validate().message().find("--lr-scaling 'sqrt' is not one of none, linear") != std::string::npos);
}

TEST_CASE("gradient accumulation gives the update of the whole batch, to rounding", "[accumulate]") {
  const Dataset train = blobs(400, 4, 5, 1), test = blobs(80, 4, 5, 2);
  for (const char* optimizer : {"adam", "sgd"}) {
    TrainOptions o = small();
    o.optimizer = optimizer;
    o.warmup_steps = 5;
    std::vector<float> whole, pieces;
    auto one = train_with_trainer(o, train, test, {}, &whole);
    REQUIRE(one.ok());
    o.accumulate = 4;
    auto four = train_with_trainer(o, train, test, {}, &pieces);
    REQUIRE(four.ok());
    INFO(optimizer);
    CHECK(four->steps == one->steps);
    CHECK(relative_difference(pieces, whole) <= 1e-5);
    CHECK(std::fabs(four->final_loss - one->final_loss) <= 1e-5 * std::fabs(one->final_loss));
    CHECK(four->history.back().train_accuracy == one->history.back().train_accuracy);
  }
}

TEST_CASE("gradient accumulation with sync replicas matches one process on the global batch", "[accumulate][sync]") {
  const Dataset train = blobs(400, 4, 5, 1), test = blobs(80, 4, 5, 2);
  TrainOptions o = small();
  std::vector<float> want;
  REQUIRE(train_with_trainer(o, train, test, {}, &want).ok());
  o.accumulate = 2;
  auto transports = collectives::make_inproc_group(2);
  std::vector<std::vector<float>> got(2);
  std::vector<Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      Replica replica;
      replica.comm = &comm;
      auto result = train_replica(o, train, test, replica, {}, &got[r]);
      if (!result.ok()) status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO(status[r].to_string());
    REQUIRE(status[r].ok());
  }
  CHECK(got[0] == got[1]);
  CHECK(relative_difference(got[0], want) <= 1e-5);
}

TEST_CASE("accumulation that does not divide the batch, and on the GPU path, is refused", "[accumulate][errors]") {
  TrainOptions o = small();
  o.accumulate = 3;
  CHECK(o.validate().message() == "--accumulate 3 must be >= 1 and divide --batch-size 40");
  o.accumulate = 4;
  o.device = Device::cuda(0);
  CHECK(o.validate().message().find("--accumulate runs on the CPU path only") != std::string::npos);
  // With replicas the batch must divide among replicas x micro-batches.
  o.device = Device::cpu();
  const Dataset train = blobs(100, 2, 3, 7), test = blobs(20, 2, 3, 8);
  auto transports = collectives::make_inproc_group(3);
  collectives::Communicator comm(std::move(transports[0]));
  Replica replica;
  replica.comm = &comm;
  o.batch_size = 32;  // divides by 4 micro-batches, not by 3 replicas x 4
  auto refused = train_replica(o, train, test, replica);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("does not divide among 3 replicas x 4 micro-batches") != std::string::npos);
  // An elastic replica's rows (Replica::local_rows) must divide into the micro-batches too.
  Replica elastic;
  elastic.local_rows = 30;
  o.batch_size = 40;
  auto uneven = train_replica(o, train, test, elastic);
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.status().message() == "an elastic replica's 30 rows of the global batch 40 must be at most the batch, "
                                     "and divide into --accumulate 4 micro-batches");
}
