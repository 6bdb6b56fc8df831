// The runtime's sync strategies with a module scripted in Python (fashion_mlp.pt: no batch
// statistics), in process over the same harness as the built-in models' (tests/trainers/sync/
// replica_threads.h): after 100 steps `--shard optimizer` and `--shard gradients` over 2 replicas,
// and `--accumulate 2` (alone, over 2 replicas, with --shard optimizer), each end within 1e-5 of
// one process trained on the global batch.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using troupe::testing::relative_difference;
using troupe::testing::run_replica_threads;
using troupe::testing::run_stage;

namespace {

// The 784-64-10 module on 100 global batches of 32 of 10 noisy class centres in 28x28, with clipping
// (the whole model's norm, summed over the shards when they are) and Adam's state to shard.
TrainOptions mlp_job() {
  TrainOptions o;
  o.model = "torchscript";
  o.trainer_args = {"file=" + std::string(TROUPE_TORCH_FIXTURE_DIR) + "/fashion_mlp.pt"};
  o.batch_size = 32;
  o.epochs = 1;
  o.max_steps = 100;
  o.optimizer = "adamw";
  o.lr = 0.003f;
  o.weight_decay = 0.01f;
  o.clip_grad_norm = 1.0f;
  o.seed = 9;
  return o;
}

struct Blobs {
  Dataset train = blobs(32 * 100, 10, 28, 41), test = blobs(200, 10, 28, 42);
};

// One process on the global batch: its final parameters.
std::vector<float> one_process(const TrainOptions& o, const Blobs& d) {
  std::vector<float> params;
  auto one = train_with_trainer(o, d.train, d.test, {}, &params);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  CHECK(one->test_accuracy >= 0.9);  // it learned: a difference in the updates would show
  return params;
}

void check_close(const testing::ReplicaThreads& run, const std::vector<float>& want, const std::string& what) {
  INFO(what << "\n" << run.errors());
  REQUIRE(run.all_ok());
  CHECK(run.identical());
  const double diff = relative_difference(run.params[0], want);
  INFO("relative difference to one process: " << diff);
  CHECK(diff < 1e-5);
}

}  // namespace

TEST_CASE("torchscript: --shard optimizer and --shard gradients over 2 replicas end within 1e-5 of one process on "
          "the global batch after 100 steps", "[torch][sharded]") {
  const Blobs d;
  const TrainOptions o = mlp_job();
  const std::vector<float> want = one_process(o, d);
  for (ShardStage stage : {ShardStage::optimizer, ShardStage::gradients})
    check_close(run_stage(2, o, d.train, d.test, stage, 16 << 10), want,
                std::string("--shard ") + shard_stage_name(stage));
}

TEST_CASE("torchscript: --accumulate 2 ends within 1e-5 of one process on the global batch after 100 steps: alone, "
          "over 2 replicas, and with --shard optimizer", "[torch][accumulate]") {
  const Blobs d;
  TrainOptions o = mlp_job();
  const std::vector<float> want = one_process(o, d);
  o.accumulate = 2;
  std::vector<float> accumulated;
  auto alone = train_with_trainer(o, d.train, d.test, {}, &accumulated);
  INFO(alone.status().to_string());
  REQUIRE(alone.ok());
  const double diff = relative_difference(accumulated, want);
  INFO("one process, --accumulate 2: relative difference " << diff);
  CHECK(diff < 1e-5);
  check_close(run_replica_threads(2, o, d.train, d.test, nullptr), want, "2 replicas, --accumulate 2");
  check_close(run_stage(2, o, d.train, d.test, ShardStage::optimizer), want, "--shard optimizer, --accumulate 2");
}
