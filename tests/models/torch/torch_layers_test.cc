// A scripted nn.Sequential trained layer by layer (models/torch/sequential_layers.h): pipelines of 2
// stages, with and without data parallelism, under GPipe and 1F1B, and `--shard parameters` replicas
// hold the parameters one process (plain sync) holds after the same steps; a module that is not a
// sequence is refused by the pipeline with an error that says why.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/models/torch/torch_jobs.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/library/bundled_models.h"
#include "trainers/pipeline/local_pipeline.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using troupe::testing::relative_difference;

namespace {

std::string fixture(const std::string& name) { return std::string(TROUPE_TORCH_FIXTURE_DIR) + "/" + name; }

// seq_cnn.pt: conv-relu-pool-flatten, linear-tanh, linear: three layers over 1x8x8 inputs, 4 classes.
TrainOptions sequence_job(const std::string& file = "seq_cnn.pt") {
  TrainOptions o = troupe::testing::torch_sgd_job("torchscript", {"file=" + fixture(file), "input_shape=1,8,8"}, 6);
  o.evaluate_each_epoch = false;
  return o;
}

}  // namespace

TEST_CASE("torchscript layers: a pipeline of 2 stages, with and without data parallelism, under GPipe and 1F1B, "
          "holds one process's parameters", "[torch][pipeline][equivalence]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  const TrainOptions o = sequence_job();
  std::vector<float> want;
  auto one = train_with_trainer(o, train, test, {}, &want);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  CHECK(one->test_accuracy >= 0.9);
  for (int replicas : {1, 2})
    for (const char* schedule : {"gpipe", "1f1b"}) {
      pipeline::PipelineOptions po;
      po.stages = 2;
      po.workers = 2 * replicas;
      po.microbatches = 4;
      po.schedule = schedule;
      auto run = pipeline::train_local_pipeline(o, po, train, test);
      INFO(replicas << " replicas, " << schedule << ": " << (run.ok() ? std::string("ok") : run.status().to_string()));
      REQUIRE(run.ok());
      REQUIRE(run->params.size() == want.size());
      const double diff = relative_difference(run->params, want);
      INFO("relative difference to one process: " << diff);
      CHECK(diff < 1e-5);
      CHECK(run->train.test_accuracy == Approx(one->test_accuracy).margin(0.0125));  // one example of 80
    }
}

TEST_CASE("torchscript layers: --shard parameters replicas end where plain sync replicas end",
          "[torch][sharded][equivalence]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  for (int replicas : {2, 3}) {
    const auto [plain, sharded] =
        troupe::testing::check_sharded_matches_plain(replicas, sequence_job(), train, test, ShardStage::parameters, 2048);
    CHECK(sharded.results[0].test_accuracy == Approx(plain.results[0].test_accuracy).margin(0.0125));
  }
}

TEST_CASE("torchscript layers: a module that is not an nn.Sequential cannot be pipelined, and the error says so",
          "[torch][pipeline][errors]") {
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(80, 4, 8, 4);
  pipeline::PipelineOptions po;
  po.stages = 2;
  po.workers = 2;
  po.microbatches = 2;
  auto run = pipeline::train_local_pipeline(sequence_job("small_cnn.pt"), po, train, test);
  REQUIRE_FALSE(run.ok());
  INFO(run.status().to_string());
  CHECK(run.status().message().find("does not declare its layers") != std::string::npos);
}
