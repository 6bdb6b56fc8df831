// An elastic sync job's data path at a smaller size: the ledger keeps 4 shards per epoch, and 3 or
// 2 workers each train several of them side by side (LedgerFeed lanes), their gradients weighted by
// their rows of the global batch (Replica::local_rows). They must end with the parameters of the 4
// workers, and the ledger must show every shard of every epoch DONE, claimed once.
#include <catch2/catch.hpp>

#include <thread>

#include "collectives/inproc_transport.h"
#include "core/config.h"
#include "gcs/in_memory_store.h"
#include "data/shards/shard_ledger.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/sync/trainer_driver.h"
#include "tests/models/markov_tokens.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;

using troupe::testing::relative_difference;

namespace {

Dataset prefix_of(Dataset d, int64_t n) {
  d.count = n;
  d.images.resize(static_cast<size_t>(n * d.features()));
  d.labels.resize(static_cast<size_t>(n));
  return d;
}

// The first `n` Fashion-MNIST training examples, and the test set.
std::pair<Dataset, Dataset> fashion_prefix(int64_t n) {
  auto train = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
  auto test = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::test);
  REQUIRE(train.ok());
  REQUIRE(test.ok());
  return {prefix_of(std::move(*train), n), std::move(*test)};
}

// The mlp for two epochs at a global batch of 128 (adam, seed 5).
TrainOptions two_epochs() {
  TrainOptions o;
  o.epochs = 2;
  o.batch_size = 128;
  o.seed = 5;
  o.optimizer = "adam";
  return o;
}

// `world` replicas on the ledger's `shards` shards, as job_worker.cc's run_sync sets them up; every
// replica's final parameters (they must agree), and the ledger's records of both epochs checked:
// every shard DONE, claimed once, by its rank (shard s by rank s mod world, whoever asked first).
std::vector<float> train_elastic(const TrainOptions& o, const Dataset& data, const Dataset& test, int world, int shards,
                                 size_t bucket_bytes, ShardStage shard = ShardStage::none) {
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  auto transports = collectives::make_inproc_group(world);
  std::vector<Status> status(world);
  std::vector<std::vector<float>> params(world);
  std::vector<WorkerId> ids(world);
  for (WorkerId& id : ids) id = WorkerId::random();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      job::LedgerFeedOptions fo = job::sync_feed_options(o.seed, o.batch_size, shards, r, world);
      fo.keep_partial = o.pads_last_batch();  // as job_worker.cc
      job::LedgerFeed feed(data, store, job, ids[r], fo);
      Replica replica;
      replica.comm = &comm;
      replica.feed = &feed;
      replica.timeout = std::chrono::seconds(30);
      replica.bucket_bytes = bucket_bytes;
      replica.shard = shard;
      if (world != shards) replica.local_rows = static_cast<int>(fo.shards_per_step * fo.batch_size);
      auto result = train_replica(o, data, test, replica, {}, &params[r]);
      status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    INFO("world " << world << " replica " << r << ": " << status[r].to_string());
    REQUIRE(status[r].ok());
    CHECK(params[r] == params[0]);
  }
  data::ShardLedger ledger(store, job, data::ShardLedgerOptions{shards});
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    auto records = ledger.epoch_status(epoch);
    REQUIRE(records.ok());
    REQUIRE(records->size() == static_cast<size_t>(shards));
    for (const gcs::ShardRecord& s : *records) {
      INFO("world " << world << " epoch " << epoch << " shard " << s.shard);
      CHECK(s.state == gcs::ShardState::done);
      CHECK(s.claims == 1);
      CHECK(s.owner == ids[static_cast<size_t>(s.shard % world)]);  // rank r trains the shards r, r + N', ...
    }
  }
  return params[0];
}

}  // namespace

TEST_CASE("elastic shards: worker r of N' trains the shards s with s mod N' == r", "[jobs][feed][elastic]") {
  CHECK(job::shards_of(0, 4, 4) == 1);
  CHECK(job::shards_of(0, 3, 4) == 2);
  CHECK(job::shards_of(1, 3, 4) == 1);
  CHECK(job::shards_of(2, 3, 4) == 1);
  CHECK(job::shards_of(0, 1, 4) == 4);
  CHECK(job::shards_of(3, 3, 4) == 0);  // outside the world
  int total = 0;
  for (int r = 0; r < 5; ++r) total += job::shards_of(r, 5, 16);
  CHECK(total == 16);
}

TEST_CASE("elastic sync data: 3 or 2 workers on 4 ledger shards hold the parameters of 4 workers, sharded or not",
          "[jobs][feed][elastic][equivalence][sharded]") {
  // As ledger_feed_test.cc's equivalence: 100 steps (2 epochs of 6,400 examples at batch 128),
  // where rounding differences have not grown yet.
  const auto [data, test] = fashion_prefix(6400);
  const TrainOptions o = two_epochs();
  const std::vector<float> full = train_elastic(o, data, test, 4, 4, 0);
  for (int world : {3, 2}) {
    for (size_t bucket_bytes : {size_t{0}, kDefaultBucketBytes}) {
      const double diff = relative_difference(train_elastic(o, data, test, world, 4, bucket_bytes), full);
      INFO(world << " workers, buckets of " << bucket_bytes << " bytes: relative difference " << diff);
      CHECK(diff <= 1e-5);
    }
  }
  // With --accumulate 2: 3 workers (64 and 32 rows) compute their rows in 2 micro-batches each.
  TrainOptions micro = o;
  micro.accumulate = 2;
  const double diff = relative_difference(train_elastic(micro, data, test, 3, 4, 0), full);
  INFO("3 workers, 2 micro-batches: relative difference " << diff);
  CHECK(diff <= 1e-5);
  // A sharded job that shrank: 3 workers own 1/3 each of the state (--shard) while training the 4
  // shards' rows unevenly (64 and 32 rows, weighted); the update is still the full batch's.
  for (ShardStage stage : {ShardStage::optimizer, ShardStage::gradients, ShardStage::parameters}) {
    const double sharded = relative_difference(train_elastic(o, data, test, 3, 4, kDefaultBucketBytes, stage), full);
    INFO("3 workers, --shard " << shard_stage_name(stage) << ": relative difference " << sharded);
    CHECK(sharded <= 1e-5);
  }
}

// The gpt (token windows: a window's T next tokens its target) as an elastic job runs it: 3 and 2
// workers on the ledger's 4 shards, their windows weighted by their rows, hold the 4 workers'
// parameters, plain and with the optimizer state sharded (adamw with decay on matrices, clipping by
// the whole model's norm: both must see the full batch's gradient).
TEST_CASE("elastic sync data: the gpt at 3 and 2 workers on 4 ledger shards holds the parameters of 4 workers",
          "[jobs][feed][elastic][equivalence][gpt]") {
  const troupe::testing::MarkovChain2 chain(12, 3, 9);
  const Dataset data = troupe::testing::token_window_dataset(chain.sample(48 * 8 * 20 + 1, 3), 8, 12);
  const Dataset test = troupe::testing::token_window_dataset(chain.sample(8 * 20 + 1, 4), 8, 12);
  TrainOptions o;
  o.model = "gpt";
  o.trainer_args = {"layers=2", "heads=2", "dim=16"};
  o.seq_len = 8;
  o.batch_size = 48;  // 12 windows per ledger shard per step
  o.epochs = 2;       // 40 steps
  o.optimizer = "adamw";
  o.lr = 0.003f;
  o.weight_decay = 0.01f;
  o.weight_decay_params = "matrices";
  o.clip_grad_norm = 0.05f;
  o.seed = 3;
  const std::vector<float> full = train_elastic(o, data, test, 4, 4, 0);
  for (int world : {3, 2}) {
    const double diff = relative_difference(train_elastic(o, data, test, world, 4, kDefaultBucketBytes), full);
    INFO(world << " workers: relative difference " << diff);
    CHECK(diff <= 1e-5);
  }
  const double sharded =
      relative_difference(train_elastic(o, data, test, 3, 4, kDefaultBucketBytes, ShardStage::optimizer), full);
  INFO("3 workers, --shard optimizer: relative difference " << sharded);
  CHECK(sharded <= 1e-5);
}

// --last-batch pad through the ledger: 6,440 examples at batch 128 leave 40 for a 51st step, which
// the interleaved plan gives to shard 0 (32 rows) and shard 1 (8); shards 2 and 3 have none. At 4
// workers two of them train a zero-weight padding row; at 3 and 2 the lanes with rows make the
// step. Every size holds one process's parameters (training the short batch), and every shard of
// every epoch is DONE, claimed once.
TEST_CASE("elastic sync data: a padded last step at 4, 3 and 2 workers on 4 ledger shards holds one process's "
          "parameters", "[jobs][feed][elastic][equivalence][last-batch]") {
  const auto [data, test] = fashion_prefix(6440);
  TrainOptions o = two_epochs();
  o.last_batch = "pad";
  std::vector<float> one;
  auto single = train_with_trainer(o, data, test, {}, &one);
  REQUIRE(single.ok());
  REQUIRE(single->steps == 102);
  for (int world : {4, 3, 2}) {
    for (size_t bucket_bytes : {size_t{0}, kDefaultBucketBytes}) {
      const double diff = relative_difference(train_elastic(o, data, test, world, 4, bucket_bytes), one);
      INFO(world << " workers, buckets of " << bucket_bytes << " bytes: relative difference " << diff);
      CHECK(diff <= 1e-5);
    }
  }
  const double sharded =
      relative_difference(train_elastic(o, data, test, 3, 4, kDefaultBucketBytes, ShardStage::gradients), one);
  INFO("3 workers, --shard gradients: relative difference " << sharded);
  CHECK(sharded <= 1e-5);
}

// The same seed gives the same bits: each rank trains the shards named for it (s mod N' == r),
// whichever asks the ledger first, so two runs of 4 or 2 workers end with equal parameters, float
// for float (first come, a worker with other shards parted by 1e-3 in one run of three).
TEST_CASE("elastic sync data: the same seed gives the same bits run to run, at 4 and 2 workers on 4 ledger shards",
          "[jobs][feed][elastic][determinism]") {
  const auto [data, test] = fashion_prefix(6440);
  TrainOptions o = two_epochs();
  o.last_batch = "pad";
  for (int world : {4, 2}) {
    INFO(world << " workers");
    const std::vector<float> first = train_elastic(o, data, test, world, 4, kDefaultBucketBytes);
    for (int run = 0; run < 2; ++run) CHECK(train_elastic(o, data, test, world, 4, kDefaultBucketBytes) == first);
  }
}
