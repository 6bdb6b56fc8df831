// GPU sync replicas (trainers/cuda/cuda_replica.h, what a job worker with --gpus-per-worker runs): two
// replicas sharing one GPU through the staged path hold the parameters one replica training on the
// global batch holds, to rounding, and the CPU replicas' parameters too; end to end they reach the
// CPU's accuracy on Fashion-MNIST.
#include <cstdlib>
#include <memory>
#include <thread>

#include "gpu_replicas.h"
#include "gpu_test_util.h"
#include "model_eval.h"
#include "trainers/cuda/cuda_replica.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {
namespace {

using troupe::testing::relative_difference;

using Run = test::ReplicaRun;
using test::run_gpu_replicas;

// A trainer with no GPU path (as any user's library is): the GPU replica must refuse it by name.
class CpuOnly final : public Trainer {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    w_ = space.declare("w", {ctx.data.features, ctx.data.classes}, Init::zeros());
    return {};
  }
  Expected<BatchStats> forward_backward(const Batch&, const Parameters&, Gradients&) override {
    return BatchStats{1.0f, -1};
  }
  Expected<BatchStats> evaluate(const Batch&, const Parameters&) override { return BatchStats{1.0f, -1}; }

 private:
  Param w_;
};
TROUPE_REGISTER_TRAINER("gpu-test-cpu-only", CpuOnly);

TEST_CASE("GPU sync replicas sharing a GPU hold the parameters of one replica on the global batch, and the CPU's",
          "[gpu][replica]") {
  const Dataset train = test::synthetic(2048, 6, 5, 3), test = test::synthetic(300, 6, 5, 4);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 2;
  o.batch_size = 64;
  o.seed = 7;
  for (const char* opt : {"sgd", "adam"}) {
    CAPTURE(opt);
    o.optimizer = opt;
    Run one = run_gpu_replicas(1, o, train, test);
    Run two = run_gpu_replicas(2, o, train, test);
    REQUIRE(one.results[0].ok());
    for (int r = 0; r < 2; ++r) {
      INFO("replica " << r << ": " << two.results[r].status().to_string());
      REQUIRE(two.results[r].ok());
      CHECK(two.results[r]->steps == one.results[0]->steps);
      CHECK(two.results[r]->device.rfind("cuda:0", 0) == 0);
    }
    CHECK(two.params[0] == two.params[1]);  // the same all-reduced update on both
    // Half batches summed on the device vs one whole batch: the same update up to summation order
    // (a sum instead of a mean, or a lost half, is off by tens of percent).
    CHECK(relative_difference(two.params[0], one.params[0]) < 1e-3);
    // The CPU path (one process, the same seed and slices) follows the same trajectory.
    std::vector<float> cpu_params;
    Replica cpu;
    auto on_cpu = train_replica(o, train, test, cpu, {}, &cpu_params);
    REQUIRE(on_cpu.ok());
    CHECK(relative_difference(one.params[0], cpu_params) < 1e-2);
    REQUIRE(one.results[0]->history.size() == on_cpu->history.size());
    for (size_t e = 0; e < on_cpu->history.size(); ++e)
      CHECK(one.results[0]->history[e].train_loss == Approx(on_cpu->history[e].train_loss).epsilon(5e-3));
    CHECK(one.results[0]->test_accuracy == Approx(on_cpu->test_accuracy).margin(0.02));
  }
}

TEST_CASE("GPU sync replicas refuse what they cannot do yet, naming it", "[gpu][replica][errors]") {
  const Dataset train = test::synthetic(256, 6, 5, 3), test = test::synthetic(50, 6, 5, 4);
  TrainOptions o;
  o.model = "gpu-test-cpu-only";
  CudaReplica replica;
  auto r = train_replica_cuda(o, train, test, replica);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().to_string());
  CHECK(r.status().message().find("gpu-test-cpu-only") != std::string::npos);  // the trainer named
  CHECK(r.status().message().find("drop --gpus-per-worker") != std::string::npos);  // and what to do
  o.model = "cnn";
  o.precision = DType::f16;  // f16 is the mlp's on GPUs (the cnn computes in f32 there)
  r = train_replica_cuda(o, train, test, replica);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("in f32 for now") != std::string::npos);
  o.model = "mlp";
  o.precision = DType::f32;
  replica.device = 99;
  r = train_replica_cuda(o, train, test, replica);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::unavailable);
}

TEST_CASE("GPU sync replicas (two sharing a GPU) reach the CPU's accuracy on Fashion-MNIST",
          "[gpu][replica][e2e]") {
  auto fashion = test::fashion_mnist();
  auto& train = fashion.train;
  auto& test = fashion.test;
  TrainOptions o;  // MLP 784-256-128-10, 10 epochs, global batch 128
  Run two = run_gpu_replicas(2, o, *train, *test);
  for (int r = 0; r < 2; ++r) {
    INFO("replica " << r << ": " << two.results[r].status().to_string());
    REQUIRE(two.results[r].ok());
    CHECK(two.results[r]->test_accuracy >= 0.885);
  }
  WARN("2 GPU replicas (staged): test accuracy " << two.results[0]->test_accuracy << ", "
                                                 << two.results[0]->samples_per_second << " samples/s");
}

TEST_CASE("GPU sync replicas (two sharing a GPU) start from --init-from, a CPU-trained model", "[gpu][replica][model]") {
  const Dataset train = test::synthetic(1000, 6, 5, 61), test = test::synthetic(300, 6, 5, 62);
  TrainOptions cpu;
  cpu.hidden = {32, 16};
  cpu.epochs = 3;
  cpu.batch_size = 32;
  const test::TrainedFile file = test::cpu_trained_file(cpu, train, test, "replica-init.safetensors");
  const double in_file = file.accuracy;
  // One step at a negligible rate: the replicas evaluate what they started from.
  TrainOptions o = test::negligible_steps_from(cpu, file.path);
  o.epochs = 1;
  o.max_steps = 1;
  Run two = run_gpu_replicas(2, o, train, test);
  for (int r = 0; r < 2; ++r) {
    INFO("replica " << r << ": " << two.results[r].status().to_string());
    REQUIRE(two.results[r].ok());
    CHECK(two.results[r]->test_accuracy == Approx(in_file).margin(2.5 / 300));
  }
  CHECK(two.params[0] == two.params[1]);
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

TEST_CASE("GPU sync replica: a checkpoint written mid-epoch resumes to the uninterrupted run's parameters",
          "[gpu][replica][checkpoint]") {
  const Dataset train = test::synthetic(1000, 6, 5, 51), test_set = test::synthetic(200, 6, 5, 52);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 2;
  o.batch_size = 16;  // 62 steps per epoch: the checkpoint of step 80 is 18 steps into epoch 2
  o.optimizer = "adam";
  char tmpl[] = "/tmp/troupe-gpu-ckpt-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  std::vector<checkpoint::Manifest> manifests;
  CudaReplica whole;
  whole.checkpoints.every = 80;
  whole.checkpoints.dir = dir;
  whole.checkpoints.tag = "gpu-test";
  whole.checkpoints.commit = [&](const checkpoint::Manifest& m) -> Status {
    manifests.push_back(m);
    return {};
  };
  std::vector<float> uninterrupted, resumed;
  auto full = train_replica_cuda(o, train, test_set, whole, {}, &uninterrupted);
  INFO(full.status().to_string());
  REQUIRE(full.ok());
  REQUIRE(manifests.size() == 1);
  CHECK(manifests[0].step == 80);
  auto state = checkpoint::load_checkpoint(manifests[0]);
  INFO(state.status().to_string());
  REQUIRE(state.ok());
  CHECK(state->epoch == 2);
  CHECK(state->epoch_step == 18);
  CHECK(state->optimizer.name == "adam");
  CHECK(state->optimizer.vectors.size() == 2);  // m and v, the CPU optimizer's format

  CudaReplica again;
  again.resume = &*state;
  auto rest = train_replica_cuda(o, train, test_set, again, {}, &resumed);
  INFO(rest.status().to_string());
  REQUIRE(rest.ok());
  CHECK(rest->steps == full->steps);
  REQUIRE(resumed.size() == uninterrupted.size());
  double worst = 0;
  for (size_t i = 0; i < resumed.size(); ++i) worst = std::max(worst, double(std::fabs(resumed[i] - uninterrupted[i])));
  CHECK(worst <= 1e-5);  // the same batches and updates from the same state (float atomics only in the loss)
  std::string cmd = "rm -rf '" + dir + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

}  // namespace
}  // namespace troupe
