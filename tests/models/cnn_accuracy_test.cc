// The CNN's purpose (issue 8): real work that beats the MLP on Fashion-MNIST. Trained through the
// runtime's CPU loop on the real dataset, it must reach test accuracy >= 0.92 (the MLP reaches
// 0.893-0.895). The run is sized to stay near 3 minutes on one core of the 2-core CI machine
// (docs/benchmarks.md: "CPU: the CNN").
#include <catch2/catch.hpp>

#include <chrono>

#include "trainers/sync/trainer_driver.h"

using namespace troupe;

TEST_CASE("cnn reaches 0.92 test accuracy on Fashion-MNIST", "[cnn][accuracy][long]") {
  auto train = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
  auto test = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::test);
  INFO("the dataset (scripts/install-deps.sh installs it): " << train.status().to_string() << " "
                                                               << test.status().to_string());
  REQUIRE(train.ok());
  REQUIRE(test.ok());
  TrainOptions o;
  o.model = "cnn";
  o.trainer_args = {"channels=32,64", "kernel=3", "hidden=256"};  // the trainer's defaults, spelled out
  // Batch 32: per sample the step costs ~10% more than at 64 or 128 (the convolutions work on
  // chunks of a few images whatever the batch), for 2-4x the updates per epoch. Measured on dev:
  // 0.9239 (seed 1) and 0.9260 (seed 2) after these 4 epochs; 5 epochs at batch 64 gave 0.9218.
  o.epochs = 4;
  o.batch_size = 32;
  o.seed = 1;
  o.evaluate_each_epoch = false;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = train_with_trainer(o, *train, *test);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.ok());
  WARN(r->model << ": test accuracy " << r->test_accuracy << " after " << o.epochs << " epochs in " << seconds
                << " s (" << r->samples_per_second << " samples/s)");
  CHECK(r->epochs == o.epochs);
  CHECK(r->test_accuracy >= 0.92);
}
