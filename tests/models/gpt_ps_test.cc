// The gpt under the parameter-server strategies (trainers/ps/): a token window's next tokens are
// its target (seq_len classes per example), which the workers' batches, replays and the shards
// carry like one class. Central mode is synchronous averaging, so 4 workers must hold the
// parameters of one process training on the global batch; async workers learn a Markov chain to
// near its entropy rate.
#include <catch2/catch.hpp>

#include "tests/models/markov_tokens.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/ps/ps_fixture.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using namespace troupe::ps;
using troupe::testing::MarkovChain2;

namespace {

TrainOptions gpt_options() {
  TrainOptions o;
  o.model = "gpt";
  o.trainer_args = {"layers=1", "heads=2", "dim=16"};
  o.seq_len = 8;
  o.batch_size = 16;
  o.optimizer = "adamw";
  o.lr = 0.01f;
  o.seed = 5;
  o.evaluate_each_epoch = false;
  return o;
}


}  // namespace

TEST_CASE("ps gpt: central mode with 4 workers holds the parameters of one process on the global batch",
          "[models][gpt][ps][central][equivalence]") {
  const MarkovChain2 chain(12, 3, 9);
  const Dataset train = troupe::testing::token_window_dataset(chain.sample(8 * 16 * 20 + 1, 3), 8, 12);
  const Dataset test = troupe::testing::token_window_dataset(chain.sample(8 * 20 + 1, 4), 8, 12);
  TrainOptions o = gpt_options();
  o.epochs = 1;
  o.max_steps = 12;  // f32 sums in another order drift apart under Adam: ~1e-5 after 20 steps
  o.optimizer = GENERATE("adamw", "sgd");
  std::vector<float> want;
  auto one = train_with_trainer(o, train, test, {}, &want);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  PsJob job = start_ps_job(o, train.spec(), ps_shape(PsMode::central, 4, train.count));
  WorkerRuns run = run_ps_workers(job, 4, o, train, test, /*want_params=*/true);
  INFO(o.optimizer);
  check_central_equivalence(run, want);
  CHECK(run.results[0].test_loss == Approx(one->test_loss).epsilon(1e-4));
}

// --clip-grad-norm and --weight-decay-params matrices under the parameter servers: a central job's
// one server clips the averaged gradient by the whole model's norm (the global batch's, as sync
// clips it), each shard decays its part of the matrices; an async worker clips each push by its own
// gradient's norm (a push is an update of its own). Both hold one process's parameters: 4 central
// workers on the global batch, and 1 async worker at staleness 0 (its pushes one process's steps).
TEST_CASE("ps gpt: clipping by the whole model's norm and matrix-only decay hold one process's parameters",
          "[models][gpt][ps][central][async][equivalence]") {
  const MarkovChain2 chain(12, 3, 9);
  const Dataset train = troupe::testing::token_window_dataset(chain.sample(8 * 16 * 20 + 1, 3), 8, 12);
  const Dataset test = troupe::testing::token_window_dataset(chain.sample(8 * 20 + 1, 4), 8, 12);
  TrainOptions o = gpt_options();
  o.epochs = 1;
  o.max_steps = 12;
  o.weight_decay = 0.1f;
  o.weight_decay_params = "matrices";
  o.clip_grad_norm = 0.05f;  // clips every step
  std::vector<float> want;
  auto one = train_with_trainer(o, train, test, {}, &want);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  SECTION("central, one server: clipped and decayed there") {
    PsJobShape shape = ps_shape(PsMode::central, 4, train.count);
    shape.shards = 1;
    PsJob job = start_ps_job(o, train.spec(), shape);
    check_central_equivalence(run_ps_workers(job, 4, o, train, test, /*want_params=*/true), want);
  }
  SECTION("central, two servers: the decay split at the servers' boundary; clipping refused, naming why") {
    TrainOptions unclipped = o;
    unclipped.clip_grad_norm = 0;
    std::vector<float> plain;
    REQUIRE(train_with_trainer(unclipped, train, test, {}, &plain).ok());
    PsJob job = start_ps_job(unclipped, train.spec(), ps_shape(PsMode::central, 4, train.count));
    check_central_equivalence(run_ps_workers(job, 4, unclipped, train, test, /*want_params=*/true), plain);
    auto refused = make_job_shard(o, train.spec(), ps_shape(PsMode::central, 4, train.count), 0);
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.status().message(), Catch::Contains("--clip-grad-norm with 2 central parameter servers"));
  }
  SECTION("async, one worker at staleness 0: each push clipped by the worker") {
    PsJob job = start_ps_job(o, train.spec(), ps_shape(PsMode::async, 1, train.count, 0));
    WorkerRuns run = run_ps_workers(job, 1, o, train, test, /*want_params=*/true);
    INFO(run.status[0].to_string());
    REQUIRE(run.status[0].ok());
    const double diff = troupe::testing::relative_difference(run.params[0], want);
    INFO("relative difference " << diff);
    CHECK(diff <= 1e-5);
  }
}

TEST_CASE("ps gpt: async workers learn a Markov chain to near its entropy rate", "[models][gpt][ps][async]") {
  const MarkovChain2 chain(16, 3, 5, 1);
  const double rate = chain.entropy_rate();
  const Dataset train = troupe::testing::token_window_dataset(chain.sample(60000, 1), 16, 16);
  const Dataset test = troupe::testing::token_window_dataset(chain.sample(16000, 2), 16, 16);
  TrainOptions o = gpt_options();
  o.trainer_args = {"layers=1", "heads=2", "dim=32"};
  o.seq_len = 16;
  o.epochs = 3;
  PsJob job = start_ps_job(o, train.spec(), ps_shape(PsMode::async, 2, train.count));
  WorkerRuns run = run_ps_workers(job, 2, o, train, test);
  for (int r = 0; r < 2; ++r) {
    INFO("worker " << r << ": " << run.status[r].to_string());
    REQUIRE(run.status[r].ok());
  }
  INFO("test loss " << run.results[0].test_loss << " nats/token; the chain's entropy rate " << rate);
  CHECK(run.results[0].test_accuracy == -1);  // a language model: the loss, no accuracy
  CHECK(run.results[0].test_loss < rate + 0.1);
  CHECK(run.results[0].test_loss > rate - 0.1);
}
