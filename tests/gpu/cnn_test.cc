// The cnn on a GPU (models/cnn/cnn_cuda.h) against the CPU cnn trainer: one step's loss, correct
// count and every gradient; training on synthetic images along the CPU's trajectory; CUDA graphs
// against eager launches; and on Fashion-MNIST the accuracy users rely on (>= 0.92).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "models/cnn/cnn_cuda.h"
#include "models/cnn/cnn_gpu.h"
#include "trainers/cuda/cuda_trainer.h"
#include "trainers/local/local_trainer.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {
namespace {

using test::DeviceArray;
using test::synthetic;
namespace kc = kernels::cuda;

#ifdef TROUPE_WITH_CUDNN

TrainOptions small_cnn() {
  TrainOptions o;
  o.model = "cnn";
  o.trainer_args = {"channels=4,8", "kernel=3", "hidden=16"};
  o.epochs = 3;
  o.batch_size = 16;
  o.device = Device::cuda(0);
  return o;
}

TEST_CASE("GPU cnn: one step's loss, correct count and gradients match the CPU cnn trainer", "[gpu][cnn]") {
  // 12 x 12 images: two blocks (12 -> 6 -> 3), the second pooling from an even side, a 3 x 3 map
  // into the dense head; channels=4,8 and kernel=5 as well to move the padding.
  for (const char* kernel : {"kernel=3", "kernel=5"}) {
    CAPTURE(kernel);
    TrainOptions o = small_cnn();
    o.trainer_args[1] = kernel;
    const Dataset data = synthetic(40, 12, 5, 11);
    const DataSpec spec{data.features(), data.classes};
    auto setup = cnn_cuda_setup(o, spec);
    REQUIRE(setup.ok());
    auto cpu = set_up_trainer(o, spec, 0, 1);
    REQUIRE(cpu.ok());
    const size_t n = cpu->space.size();
    REQUIRE(setup->initial.size() == n);
    std::vector<float> cpu_params(n);
    init_parameters(cpu->space, o.seed, cpu_params.data());
    CHECK(setup->initial == cpu_params);  // the GPU starts where the CPU does

    const int rows = 40;
    std::vector<float> cpu_grads(n, 0.0f);
    Gradients grads(cpu_grads.data(), n);
    Batch batch{data.images.data(), data.labels.data(), rows, data.features()};
    auto stats = cpu->trainer->forward_backward(batch, Parameters(cpu_params.data(), n), grads);
    REQUIRE(stats.ok());

    kc::Stream stream;
    REQUIRE(stream.create().ok());
    kc::CublasHandle blas;
    REQUIRE(blas.create(stream.get()).ok());
    auto model = make_cnn_cuda(*setup, blas, false);
    REQUIRE(model.ok());
    REQUIRE((*model)->reserve(rows).ok());
    DeviceArray<float> params(cpu_params), x(data.images), gpu_grads(std::vector<float>(n, 7.0f)), loss(1);
    DeviceArray<int32_t> labels(data.labels);
    DeviceArray<unsigned long long> correct(1);
    Status st = (*model)->forward_backward(params.get(), x.get(), labels.get(), rows, gpu_grads.get(), loss.get(),
                                           correct.get());
    INFO(st.to_string());
    REQUIRE(st.ok());
    CHECK(loss.host()[0] == Approx(stats->loss).epsilon(1e-5));
    CHECK(static_cast<int64_t>(correct.host()[0]) == stats->correct);
    const auto got = gpu_grads.host();
    for (const ParamBlock& b : cpu->space.blocks()) {  // each block against its own scale
      CAPTURE(b.name);
      double largest = 0;
      for (size_t i = b.param.offset; i < b.param.offset + b.param.numel; ++i)
        largest = std::max(largest, double(std::fabs(cpu_grads[i])));
      REQUIRE(largest > 0);
      size_t bad = 0;
      for (size_t i = b.param.offset; i < b.param.offset + b.param.numel; ++i) {
        if (!(std::fabs(got[i] - cpu_grads[i]) <= 1e-4 * largest)) ++bad;
      }
      CHECK(bad == 0);
    }
    // Evaluation: the same correct count as the CPU's forward.
    DeviceArray<unsigned long long> eval_correct(1);
    REQUIRE((*model)->evaluate(params.get(), x.get(), labels.get(), rows, nullptr, eval_correct.get()).ok());
    CHECK(static_cast<int64_t>(eval_correct.host()[0]) == stats->correct);
    // More rows than reserved are refused.
    CHECK((*model)->evaluate(params.get(), x.get(), labels.get(), rows + 1, nullptr, nullptr).code() ==
          Code::invalid_argument);
  }
}

TEST_CASE("GPU cnn follows the CPU cnn trainer's trajectory on synthetic images", "[gpu][cnn][trainer]") {
  // 1100 / 16 = 68 steps per epoch: a full chunk of 64 steps (one graph) and a short one.
  const Dataset train = synthetic(1100, 12, 5, 21), test = synthetic(300, 12, 5, 22);
  for (const char* opt : {"sgd", "adam"}) {
    CAPTURE(opt);
    TrainOptions o = small_cnn();
    o.optimizer = opt;
    TrainOptions c = o;
    c.device = Device::cpu();
    auto cpu = train_with_trainer(c, train, test);
    auto gpu = train_cnn_cuda(o, train, test);
    INFO(gpu.status().to_string());
    REQUIRE(cpu.ok());
    REQUIRE(gpu.ok());
    REQUIRE(gpu->history.size() == 3);
    CHECK(gpu->steps == cpu->steps);
    CHECK(gpu->model == cpu->model);
    for (size_t e = 0; e < 3; ++e) {
      CHECK(gpu->history[e].train_loss == Approx(cpu->history[e].train_loss).epsilon(1e-2));
      CHECK(gpu->history[e].test_accuracy == Approx(cpu->history[e].test_accuracy).margin(0.03));
    }
    CHECK(gpu->history.back().train_loss < gpu->history.front().train_loss);
  }
}

TEST_CASE("GPU cnn: CUDA graphs and eager launches train the same model", "[gpu][cnn][trainer]") {
  const Dataset train = synthetic(1100, 12, 5, 23), test = synthetic(300, 12, 5, 24);
  TrainOptions o = small_cnn();
  o.cuda_graphs = true;
  auto graphed = train_cnn_cuda(o, train, test);
  o.cuda_graphs = false;
  auto eager = train_cnn_cuda(o, train, test);
  INFO(graphed.status().to_string() << " / " << eager.status().to_string());
  REQUIRE(graphed.ok());
  REQUIRE(eager.ok());
  // cuDNN's algorithms are chosen deterministic where they can be and the same in both runs; the
  // loss adds up through float atomics, so compare it loosely and the accuracies exactly.
  for (size_t e = 0; e < graphed->history.size(); ++e) {
    CHECK(graphed->history[e].test_accuracy == eager->history[e].test_accuracy);
    CHECK(graphed->history[e].train_loss == Approx(eager->history[e].train_loss).epsilon(1e-4));
  }
}

TEST_CASE("GPU cnn refuses settings the CPU trainer refuses", "[gpu][cnn][errors]") {
  const Dataset train = synthetic(100, 12, 5, 25);
  TrainOptions o = small_cnn();
  o.trainer_args = {"channels=4,8", "kernel=4"};
  auto r = train_cnn_cuda(o, train, train);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::invalid_argument);
  CHECK_THAT(r.status().message(), Catch::Contains("kernel=4"));
  const Dataset flat = synthetic(100, 1, 5, 26);  // 1 x 1 images: no room for a block
  o.trainer_args = {"channels=4"};
  CHECK(train_cnn_cuda(o, flat, flat).status().code() == Code::invalid_argument);
}

TEST_CASE("GPU cnn reaches 0.92 test accuracy on Fashion-MNIST", "[gpu][cnn][e2e]") {
  auto fashion = test::fashion_mnist();
  auto& train = fashion.train;
  auto& test = fashion.test;
  TrainOptions o;  // the CPU accuracy test's run (tests/models/cnn_accuracy_test.cc)
  o.model = "cnn";
  o.trainer_args = {"channels=32,64", "kernel=3", "hidden=256"};
  o.epochs = 4;
  o.batch_size = 32;
  o.seed = 1;
  o.device = Device::cuda(0);
  auto gpu = train_cnn_cuda(o, *train, *test);
  INFO(gpu.status().to_string());
  REQUIRE(gpu.ok());
  WARN("Fashion-MNIST cnn on " << gpu->device << ": test accuracy " << gpu->test_accuracy << " ("
                               << gpu->samples_per_second << " samples/s)");
  CHECK(gpu->test_accuracy >= 0.92);
}

#else

TEST_CASE("GPU cnn: not built", "[gpu][cnn]") {
  WARN("SKIPPED: this troupe was built without cuDNN; train_cnn_cuda refuses, and says so");
  const Dataset train = synthetic(100, 12, 5, 25);
  TrainOptions o;
  o.model = "cnn";
  o.device = Device::cuda(0);
  CHECK(train_cnn_cuda(o, train, train).status().code() == Code::unavailable);
}

#endif

}  // namespace
}  // namespace troupe
