// Parameter-server training end to end (trainers/ps/async_worker.h) over real TCP: two shard
// servers and four worker threads. Central mode is synchronous averaging, so it must hold the
// parameters of one process training on the global batch; async and central both train the MLP
// on Fashion-MNIST to the accuracy of local training, and central holds one process's parameters
// for value targets (a regression) too.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <random>

#include "tests/trainers/blobs.h"
#include "tests/trainers/ps/ps_fixture.h"
#include "trainers/sync/trainer_driver.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;
using namespace troupe::ps;

using troupe::testing::relative_difference;

namespace {

const Dataset& fashion(Split split) {
  static const Dataset train = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train).value();
  static const Dataset test = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::test).value();
  return split == Split::train ? train : test;
}

PsJobShape shape(PsMode mode, int64_t train_examples, int64_t staleness = -1) {
  return ps_shape(mode, 4, train_examples, staleness);
}

}  // namespace

TEST_CASE("ps training: central mode with 4 workers holds the parameters of one process on the global batch",
          "[ps][central][equivalence]") {
  const Dataset &train = fashion(Split::train), &test = fashion(Split::test);
  TrainOptions o;
  o.epochs = 1;
  o.batch_size = 128;
  o.seed = 11;
  o.max_steps = 60;
  for (const char* optimizer : {"adam", "sgd"}) {
    o.optimizer = optimizer;
    std::vector<float> want;
    REQUIRE(train_with_trainer(o, train, test, {}, &want).ok());
    PsJob job = start_ps_job(o, DataSpec{train.features(), train.classes}, shape(PsMode::central, train.count));
    WorkerRuns run = run_ps_workers(job, 4, o, train, test, /*want_params=*/true);
    for (int r = 0; r < 4; ++r) {
      INFO(optimizer << " worker " << r << ": " << run.status[r].to_string());
      REQUIRE(run.status[r].ok());
      CHECK(run.results[r].steps == 60);
      CHECK(run.params[r] == run.params[0]);
      CHECK(run.reports[r].staleness.max == 0);
    }
    const double diff = relative_difference(run.params[0], want);
    INFO(optimizer << ": relative difference " << diff);
    CHECK(diff <= 1e-5);
  }
}

TEST_CASE("ps training: the cnn in central mode holds the parameters of one process on the global batch",
          "[ps][central][equivalence][cnn]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(40, 4, 8, 4);
  TrainOptions o;
  o.model = "cnn";
  o.trainer_args = {"channels=4,8", "kernel=3", "hidden=16"};
  o.epochs = 2;
  o.batch_size = 24;
  o.seed = 11;
  std::vector<float> want;
  REQUIRE(train_with_trainer(o, train, test, {}, &want).ok());
  PsJob job = start_ps_job(o, DataSpec{train.features(), train.classes}, shape(PsMode::central, train.count));
  WorkerRuns run = run_ps_workers(job, 4, o, train, test, /*want_params=*/true);
  check_central_equivalence(run, want);
}

TEST_CASE("ps training: central mode holds one process's parameters for value targets (--loss mse)",
          "[ps][central][equivalence]") {
  const Dataset train = linear_values(480, 1), test = linear_values(80, 2);
  TrainOptions o;
  o.loss = "mse";
  o.hidden = {16};
  o.epochs = 1;
  o.batch_size = 32;
  o.seed = 7;
  o.lr = 0.01f;
  std::vector<float> want;
  auto one = train_with_trainer(o, train, test, {}, &want);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  PsJob job = start_ps_job(o, train.spec(), shape(PsMode::central, train.count));
  WorkerRuns run = run_ps_workers(job, 4, o, train, test, /*want_params=*/true);
  check_central_equivalence(run, want);
  CHECK(run.results[0].test_accuracy == -1);
  CHECK(run.results[0].test_loss == Approx(one->test_loss).epsilon(1e-4));
}

TEST_CASE("ps training: async (staleness bound 4) and central reach 0.885 test accuracy on Fashion-MNIST",
          "[ps][async][central][long]") {
  const Dataset &train = fashion(Split::train), &test = fashion(Split::test);
  TrainOptions o;
  o.epochs = 10;  // local training reaches 0.893-0.895 in 10 epochs (docs/benchmarks.md)
  o.batch_size = 128;
  o.seed = 3;
  o.evaluate_each_epoch = false;
  for (PsMode mode : {PsMode::async, PsMode::central}) {
    const auto t0 = std::chrono::steady_clock::now();
    PsJob job = start_ps_job(o, DataSpec{train.features(), train.classes}, shape(mode, train.count, 4));
    WorkerRuns run = run_ps_workers(job, 4, o, train, test);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int r = 0; r < 4; ++r) {
      INFO(mode_name(mode) << " worker " << r << ": " << run.status[r].to_string());
      REQUIRE(run.status[r].ok());
    }
    const StalenessStats& st = run.reports[0].staleness;
    WARN(mode_name(mode) << ": test accuracy " << run.results[0].test_accuracy << " after " << o.epochs
                         << " epochs in " << seconds << " s; staleness " << st.describe());
    CHECK(run.results[0].test_accuracy >= 0.885);
    if (mode == PsMode::central) CHECK(st.max == 0);
    else CHECK(st.count == 4 * 2 * o.epochs * (train.count / o.batch_size));  // every push of every shard
  }
}
