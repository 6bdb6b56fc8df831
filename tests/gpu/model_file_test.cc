// Models in and out of the GPU trainer (--save / --init-from with --device cuda): the file a GPU
// run writes is the CPU trainer's (its blocks, names and shapes), so the CPU loads it and counts
// the GPU's test accuracy; a GPU run starts from a CPU-trained file; a file of another layout is
// refused naming --init-from.
#include <filesystem>
#include <string>

#include "gpu_test_util.h"
#include "model_eval.h"
#include "trainers/cuda/cuda_trainer.h"

namespace troupe {
namespace {

using test::cpu_accuracy;
using test::model_path;
using test::synthetic;

TrainOptions small_mlp() {
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 2;
  o.batch_size = 16;
  o.device = Device::cuda(0);
  return o;
}

TrainOptions small_cnn() {
  TrainOptions o = small_mlp();
  o.model = "cnn";
  o.trainer_args = {"channels=4,8", "kernel=3", "hidden=16"};
  return o;
}

TEST_CASE("GPU trainer --save: the CPU trainer loads the mlp (f32, bf16) and cnn files and counts the GPU's accuracy",
          "[gpu][model]") {
  struct Case {
    const char* what;
    TrainOptions o;
    int side;
  };
  TrainOptions bf16 = small_mlp();
  bf16.precision = DType::bf16;
  for (const Case& c : {Case{"mlp", small_mlp(), 6}, Case{"mlp bf16", bf16, 6}, Case{"cnn", small_cnn(), 12}}) {
    CAPTURE(c.what);
    const Dataset train = synthetic(1100, c.side, 5, 31), test = synthetic(300, c.side, 5, 32);
    TrainOptions o = c.o;
    o.save_path = model_path(std::string(c.what) + ".safetensors");
    std::filesystem::remove(o.save_path);
    auto r = train_cuda(o, train, test);
    INFO(r.status().to_string());
    REQUIRE(r.ok());
    REQUIRE(std::filesystem::exists(o.save_path));
    CHECK(r->test_accuracy > 0.5);  // it learned something worth keeping
    // The CPU's arithmetic may tip an example or two on the edge the other way, no more.
    CHECK(cpu_accuracy(o.save_path, o, test) == Approx(r->test_accuracy).margin(2.5 / 300));
  }
}

TEST_CASE("GPU trainer --init-from starts from a CPU-trained model; a file of another layout is refused naming it",
          "[gpu][model]") {
  const Dataset train = synthetic(1100, 6, 5, 41), test = synthetic(300, 6, 5, 42);
  TrainOptions cpu = small_mlp();
  cpu.epochs = 3;
  const test::TrainedFile file = test::cpu_trained_file(cpu, train, test, "cpu-trained.safetensors");

  // One step at a negligible rate: the GPU evaluates what it started from.
  TrainOptions g = test::negligible_steps_from(small_mlp(), file.path);
  g.epochs = 1;
  g.max_steps = 1;
  TrainOptions seeded = g;
  seeded.init_from.clear();
  auto fresh = train_cuda(seeded, train, test);
  REQUIRE(fresh.ok());
  auto from_file = train_cuda(g, train, test);
  INFO(from_file.status().to_string());
  REQUIRE(from_file.ok());
  CHECK(from_file->test_accuracy == Approx(file.accuracy).margin(2.5 / 300));
  CHECK(fresh->test_accuracy < file.accuracy - 0.2);  // the seeded start is not what the file holds

  TrainOptions other = g;
  other.hidden = {64};
  auto refused = train_cuda(other, train, test);
  REQUIRE_FALSE(refused.ok());
  INFO(refused.status().to_string());
  CHECK(refused.status().message().find("--init-from") != std::string::npos);
}

}  // namespace
}  // namespace troupe
