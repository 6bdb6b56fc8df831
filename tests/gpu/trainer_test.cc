// The GPU trainer: against the CPU trainer on synthetic data (same trajectory), graphs against
// eager launches (same parameters), max_steps, NaN detection naming the step, a missing device, and
// end to end on Fashion-MNIST (the accuracy users rely on).
#include <cmath>
#include <cstdlib>
#include <string>

#include "gpu_test_util.h"
#include "models/mlp/mlp_gpu.h"
#include "trainers/cuda/cuda_trainer.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/local/local_trainer.h"

namespace troupe {
namespace {

using test::synthetic;

MlpLayout layout_of(const TrainOptions& o, const Dataset& d) {
  std::vector<int> dims{static_cast<int>(d.features())};
  dims.insert(dims.end(), o.hidden.begin(), o.hidden.end());
  dims.push_back(d.classes);
  auto l = MlpLayout::make(dims);
  REQUIRE(l.ok());
  return *l;
}

TrainOptions small_options() {
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 3;
  o.batch_size = 16;
  o.device = Device::cuda(0);
  return o;
}

TEST_CASE("GPU trainer follows the CPU trainer's trajectory on synthetic data", "[gpu][trainer]") {
  // 2109 / 16 = 131 steps (5 examples dropped): chunks of 64, 64 and 3 steps per epoch, so the device
  // step counter is exercised across chunks and epochs.
  const Dataset train = synthetic(2109, 6, 5, 1), test = synthetic(300, 6, 5, 1);
  for (const char* opt : {"sgd", "adam", "adamw"}) {
    for (const char* schedule : {"constant", "cosine"}) {
      CAPTURE(opt, schedule);
      TrainOptions o = small_options();
      o.optimizer = opt;
      o.lr_schedule = schedule;
      o.weight_decay = 1e-3f;
      auto cpu = train_mlp_cpu(o, train, test);
      auto gpu = train_mlp_cuda(o, layout_of(o, train), train, test);
      REQUIRE(cpu.ok());
      REQUIRE(gpu.ok());
      REQUIRE(gpu->history.size() == 3);
      CHECK(gpu->steps == cpu->steps);
      CHECK(gpu->steps == 3 * 131);
      // Same start, same batches, same arithmetic up to summation order and FMA: per-epoch losses
      // agree to well under 1% (a wrong step count, rate or gradient shows as tens of percent).
      for (size_t e = 0; e < 3; ++e) {
        CHECK(gpu->history[e].train_loss == Approx(cpu->history[e].train_loss).epsilon(5e-3));
        CHECK(gpu->history[e].test_accuracy == Approx(cpu->history[e].test_accuracy).margin(0.02));
      }
      CHECK(gpu->history.back().train_loss < gpu->history.front().train_loss);  // it learns
    }
  }
}

TEST_CASE("GPU trainer: CUDA graphs and eager launches give the same parameters", "[gpu][trainer]") {
  const Dataset train = synthetic(3000, 6, 5, 2), test = synthetic(500, 6, 5, 3);
  TrainOptions o = small_options();
  o.optimizer = "adam";
  o.cuda_graphs = true;
  auto graphed = train_mlp_cuda(o, layout_of(o, train), train, test);
  o.cuda_graphs = false;
  auto eager = train_mlp_cuda(o, layout_of(o, train), train, test);
  REQUIRE(graphed.ok());
  REQUIRE(eager.ok());
  // Every kernel is deterministic except the float atomics that add up the loss, so parameters
  // (and so test accuracy) are identical; the loss may differ in its last bits.
  for (size_t e = 0; e < graphed->history.size(); ++e) {
    CHECK(graphed->history[e].test_accuracy == eager->history[e].test_accuracy);
    CHECK(graphed->history[e].train_accuracy == eager->history[e].train_accuracy);
    CHECK(graphed->history[e].train_loss == Approx(eager->history[e].train_loss).epsilon(1e-5));
  }
}

TEST_CASE("GPU trainer stops at max_steps and fills the result", "[gpu][trainer]") {
  const Dataset train = synthetic(2000, 6, 5, 4), test = synthetic(200, 6, 5, 5);
  TrainOptions o = small_options();
  o.max_steps = 100;  // 125 steps per epoch: stops inside epoch 1, in the middle of a chunk
  int progress_calls = 0, epochs_done = 0;
  auto r = train_mlp_cuda(o, layout_of(o, train), train, test, [&](const TrainProgress& p) {
    ++progress_calls;
    if (p.epoch_done) ++epochs_done;
    CHECK(p.steps_per_epoch == 125);
  });
  REQUIRE(r.ok());
  CHECK(r->steps == 100);
  CHECK(r->epochs == 1);
  CHECK(epochs_done == 1);
  CHECK(progress_calls >= 3);  // two chunks and the epoch's end
  CHECK(r->history[0].test_accuracy >= 0.0);  // evaluated although the epoch was cut short
  CHECK(r->samples_per_second > 0);
  CHECK(r->device.rfind("cuda:0 (", 0) == 0);
  CHECK(r->model == "mlp 36-32-16-5 (" + std::to_string(layout_of(o, train).param_count) + " parameters)");
}

TEST_CASE("GPU trainer reports a NaN loss naming the epoch and step", "[gpu][trainer][errors]") {
  Dataset train = synthetic(2000, 6, 5, 6);
  const Dataset test = synthetic(200, 6, 5, 7);
  TrainOptions o = small_options();
  o.epochs = 1;
  // A label outside [0, classes) makes that step's loss NaN (softmax_xent's contract); the step
  // that first sees the example is fixed by the epoch-1 permutation.
  const int32_t poisoned = 1234;
  train.labels[poisoned] = 99;
  auto perm = epoch_permutation(train.count, o.seed, 1);
  int64_t pos = 0;
  while (perm[pos] != poisoned) ++pos;
  const int64_t step = pos / o.batch_size + 1;
  for (bool graphs : {true, false}) {
    o.cuda_graphs = graphs;
    auto r = train_mlp_cuda(o, layout_of(o, train), train, test);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::numeric_error);
    CHECK_THAT(r.status().message(), Catch::Contains("NaN at epoch 1, step " + std::to_string(step) + " of 125"));
  }
}

TEST_CASE("GPU trainer reports parameters that stopped being finite", "[gpu][trainer][errors]") {
  // A NaN pixel: ReLU maps the NaN activations to 0, so the loss stays finite (as on the CPU), but
  // the weight gradient and then the weights become NaN; the final check must catch it.
  Dataset train = synthetic(2000, 6, 5, 6);
  const Dataset test = synthetic(200, 6, 5, 7);
  TrainOptions o = small_options();
  o.epochs = 1;
  train.images[1234 * train.features() + 5] = NAN;
  auto r = train_mlp_cuda(o, layout_of(o, train), train, test);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::numeric_error);
  CHECK_THAT(r.status().message(), Catch::Contains("parameters are not finite"));
}

TEST_CASE("GPU trainer refuses a device that does not exist and a mismatched model", "[gpu][trainer][errors]") {
  const Dataset train = synthetic(200, 6, 5, 8);
  TrainOptions o = small_options();
  o.device = Device::cuda(99);
  auto r = train_mlp_cuda(o, layout_of(o, train), train, train);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::unavailable);
  CHECK_THAT(r.status().message(), Catch::Contains("cuda:0"));  // says which devices exist
  o.device = Device::cuda(0);
  auto wrong = MlpLayout::make({10, 4, 5});
  REQUIRE(wrong.ok());
  CHECK(train_mlp_cuda(o, *wrong, train, train).status().code() == Code::invalid_argument);
}

TEST_CASE("GPU trainer reaches the CPU trainer's test accuracy on Fashion-MNIST", "[gpu][trainer][e2e]") {
  auto fashion = test::fashion_mnist();
  auto& train = fashion.train;
  auto& test = fashion.test;
  TrainOptions o;  // the defaults users get: MLP 784-256-128-10, 10 epochs, batch 128
  o.cpu_threads = 8;
  auto cpu = train_mlp_cpu(o, *train, *test);
  o.device = Device::cuda(0);
  auto gpu = train_mlp_cuda(o, layout_of(o, *train), *train, *test);
  REQUIRE(cpu.ok());
  REQUIRE(gpu.ok());
  WARN("Fashion-MNIST " << o.optimizer << ": cpu test accuracy " << cpu->test_accuracy << " ("
                        << cpu->samples_per_second << " samples/s), gpu " << gpu->test_accuracy << " ("
                        << gpu->samples_per_second << " samples/s on " << gpu->device << ")");
  CHECK(gpu->model == "mlp 784-256-128-10 (235146 parameters)");
  CHECK(gpu->test_accuracy >= 0.885);
  CHECK(std::fabs(gpu->test_accuracy - cpu->test_accuracy) <= 0.01);
  CHECK(gpu->final_loss == Approx(cpu->final_loss).epsilon(0.05));
}

}  // namespace
}  // namespace troupe
