// --last-batch: an epoch whose examples do not fill its last batch drops the remainder (the default),
// or pads it: one more, short step over exactly the remaining examples. In a sync job every replica
// takes that step — one with fewer rows weighted by them, one with none by a zero-weight row — so
// the replicas hold the parameters of one process training the short batch, and no collective waits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "collectives/inproc_transport.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/library/trainer_registry.h"

using namespace troupe;
using troupe::testing::relative_difference;

namespace {

// Every row a forward_backward saw: the example's index (its first input).
std::mutex seen_mutex;
std::vector<std::vector<int>> seen_batches;

class RowRecorder final : public Trainer {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    w_ = space.declare("w", {ctx.data.features, ctx.data.classes}, Init::zeros());
    return {};
  }
  Expected<BatchStats> forward_backward(const Batch& b, const Parameters&, Gradients&) override {
    std::vector<int> rows;
    for (int64_t r = 0; r < b.size; ++r) rows.push_back(static_cast<int>(b.inputs[r * b.features]));
    std::lock_guard<std::mutex> lock(seen_mutex);
    seen_batches.push_back(std::move(rows));
    return BatchStats{1.0f, -1};
  }
  Expected<BatchStats> evaluate(const Batch&, const Parameters&) override { return BatchStats{1.0f, -1}; }

 private:
  Param w_;
};
TROUPE_REGISTER_TRAINER("test-row-recorder", RowRecorder);

// `count` examples whose first input is their index.
Dataset indexed(int count) {
  Dataset d;
  d.count = count;
  d.rows = 1;
  d.cols = 2;
  d.classes = 2;
  for (int i = 0; i < count; ++i) {
    d.images.push_back(static_cast<float>(i));
    d.images.push_back(1.0f);
    d.labels.push_back(i % 2);
  }
  return d;
}

// How often each example index was seen, over every recorded batch.
std::map<int, int> seen_counts() {
  std::map<int, int> n;
  for (const auto& b : seen_batches)
    for (int i : b) ++n[i];
  return n;
}

// One epoch of the recorder at batch 32, the last batch padded; the record emptied.
TrainOptions recorder_job() {
  seen_batches.clear();
  TrainOptions o;
  o.model = "test-row-recorder";
  o.epochs = 1;
  o.batch_size = 32;
  o.last_batch = "pad";
  return o;
}

TrainOptions small_job() {
  TrainOptions o;
  o.hidden = {16};
  o.epochs = 3;
  o.batch_size = 32;
  o.seed = 3;
  o.optimizer = "adam";
  o.lr_schedule = "constant";
  return o;
}

}  // namespace

TEST_CASE("last batch: one process pads an epoch with one short step over exactly its remainder, or drops it",
          "[sync][last-batch]") {
  const Dataset train = indexed(250), test = indexed(10);
  TrainOptions o = recorder_job();
  auto padded = train_with_trainer(o, train, test);
  REQUIRE(padded.ok());
  CHECK(padded->steps == 8);  // 7 whole batches and the 26 left
  REQUIRE(seen_batches.size() == 8);
  CHECK(seen_batches.back().size() == 26);
  auto counts = seen_counts();
  CHECK(counts.size() == 250);  // every example, once
  CHECK(std::all_of(counts.begin(), counts.end(), [](const auto& kv) { return kv.second == 1; }));

  o.last_batch = "drop";
  seen_batches.clear();
  auto dropped = train_with_trainer(o, train, test);
  REQUIRE(dropped.ok());
  CHECK(dropped->steps == 7);
  CHECK(seen_counts().size() == 224);
}

TEST_CASE("last batch: 4 sync replicas pad the short step, two of them with a zero-weight row, and see each "
          "example once", "[sync][last-batch]") {
  // 237 examples at a global batch of 32 (8 per replica): the 8th step has 13 rows, 8 for replica
  // 0, 5 for replica 1, none for replicas 2 and 3 (each trains one padding row with weight 0).
  const Dataset train = indexed(237), test = indexed(8);
  TrainOptions o = recorder_job();
  auto run = testing::run_replica_threads(4, o, train, test, {});
  INFO(run.errors());
  REQUIRE(run.all_ok());
  for (const TrainResult& r : run.results) CHECK(r.steps == 8);
  REQUIRE(seen_batches.size() == 32);
  std::vector<size_t> sizes;
  for (const auto& b : seen_batches) sizes.push_back(b.size());
  CHECK(std::count(sizes.begin(), sizes.end(), size_t{8}) == 29);  // 7 steps x 4 replicas, and replica 0's last
  CHECK(std::count(sizes.begin(), sizes.end(), size_t{5}) == 1);
  CHECK(std::count(sizes.begin(), sizes.end(), size_t{1}) == 2);  // the padding rows
  auto counts = seen_counts();
  CHECK(counts.size() == 237);
  int twice = 0;  // the padding rows are copies of examples seen before
  for (const auto& [index, n] : counts) {
    CHECK(n <= 2);
    if (n == 2) ++twice;
  }
  CHECK(twice + 237 == 239);
}

TEST_CASE("last batch: padded sync replicas hold the parameters of one process training the short batch, "
          "with or without buckets, micro-batches or --shard", "[sync][last-batch][equivalence]") {
  const Dataset train = blobs(237, 4, 6, 21), test = blobs(40, 4, 6, 22);
  TrainOptions o = small_job();
  o.last_batch = "pad";
  std::vector<float> want;
  auto one = train_with_trainer(o, train, test, {}, &want);
  REQUIRE(one.ok());
  CHECK(one->steps == 24);
  // The training accuracy counts the epoch's 237 examples (a whole number of them).
  const double counted = one->history.back().train_accuracy * 237;
  CHECK(std::fabs(counted - std::round(counted)) < 1e-6);
  // The padded run is not the dropping one.
  TrainOptions drop = o;
  drop.last_batch = "drop";
  std::vector<float> dropped;
  auto d = train_with_trainer(drop, train, test, {}, &dropped);
  REQUIRE(d.ok());
  CHECK(d->steps == 21);
  CHECK(relative_difference(dropped, want) > 1e-3);

  struct Case {
    const char* what;
    ShardStage stage;
    size_t bucket_bytes;
    int accumulate;
  };
  for (const Case& k : {Case{"one all-reduce", ShardStage::none, 0, 1},
                        Case{"buckets", ShardStage::none, 256, 1},
                        Case{"2 micro-batches", ShardStage::none, 0, 2},
                        Case{"--shard optimizer", ShardStage::optimizer, 256, 1},
                        Case{"--shard gradients", ShardStage::gradients, 256, 1},
                        Case{"--shard parameters", ShardStage::parameters, 256, 1}}) {
    TrainOptions mine = o;
    mine.accumulate = k.accumulate;
    auto run = testing::run_stage(4, mine, train, test, k.stage, k.bucket_bytes);
    INFO(k.what << "\n" << run.errors());
    REQUIRE(run.all_ok());
    CHECK(run.identical());
    CHECK(run.results[0].steps == 24);
    const double diff = relative_difference(run.params[0], want);
    INFO("relative difference to one process: " << diff);
    CHECK(diff <= 1e-5);
    // Counted over the same examples: equal up to a prediction that rounding may flip.
    CHECK(run.results[0].history.back().train_accuracy ==
          Approx(one->history.back().train_accuracy).margin(1.5 / 237));
  }
}

TEST_CASE("last batch: an unknown --last-batch is refused naming the choices", "[sync][last-batch][errors]") {
  TrainOptions o = small_job();
  o.last_batch = "fill";
  Status st = o.validate();
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("--last-batch 'fill'") && Catch::Contains("drop, pad"));
}
