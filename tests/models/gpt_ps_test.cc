// The gpt under the parameter-server strategies (trainers/ps/): a token window's next tokens are
// its target (seq_len classes per example), which the workers' batches, replays and the shards
// carry like one class. Central mode is synchronous averaging, so 4 workers must hold the
// parameters of one process training on the global batch; async workers learn a Markov chain to
// near its entropy rate.
#include <catch2/catch.hpp>

#include "tests/models/markov_tokens.h"
#include "tests/trainers/ps_fixture.h"
#include "trainers/trainer_driver.h"

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
