// A job's data path as its workers run it: shards of every epoch claimed from the shard ledger and
// trained through the input pipeline (LedgerFeed). Sync: each of 4 replicas claims one shard per
// epoch, and they end with the parameters of one process training on the global batch (`troupe
// train`); async: workers take shards as they get to them. Either way the ledger shows every shard
// of every epoch trained exactly once.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <thread>

#include "collectives/inproc_transport.h"
#include "core/config.h"
#include "gcs/in_memory_store.h"
#include "data/shards/shard_ledger.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/ps/async_worker.h"
#include "trainers/ps/ps_client.h"
#include "trainers/ps/ps_job.h"
#include "trainers/sync/trainer_driver.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;

using troupe::testing::relative_difference;

namespace {

// The first `n` examples of Fashion-MNIST's training split (short epochs) and the whole test split.
void load_prefix(int64_t n, Dataset* train, Dataset* test) {
  auto loaded_train = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
  auto loaded_test = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::test);
  REQUIRE(loaded_train.ok());
  REQUIRE(loaded_test.ok());
  *train = std::move(*loaded_train);
  train->count = n;
  train->images.resize(static_cast<size_t>(n * train->features()));
  train->labels.resize(static_cast<size_t>(n));
  *test = std::move(*loaded_test);
}

}  // namespace

TEST_CASE("sync job data: 4 workers on ledger shards hold the parameters of troupe train at batch 128",
          "[jobs][feed][equivalence]") {
  // Two epochs of the first 6,400 examples: 100 steps. Summing 4 replicas' gradients rounds
  // differently from one batch's backward; training amplifies such last-bit differences step by step
  // (to ~1e-4 after 150 Adam steps, ~1e-2 after 300: the same with SliceFeed, so it is the
  // arithmetic, not the data), so equivalence is checked over 100 steps, where it is meaningful.
  Dataset data, test_set;
  load_prefix(6400, &data, &test_set);
  const Dataset* test = &test_set;
  for (const char* optimizer : {"adam", "sgd"}) {
    TrainOptions o;
    o.epochs = 2;
    o.batch_size = 128;
    o.seed = 5;
    o.optimizer = optimizer;
    std::vector<float> want;
    REQUIRE(train_with_trainer(o, data, *test, {}, &want).ok());

    gcs::InMemoryStore store;
    const JobId job = JobId::random();
    const int world = 4;
    auto transports = collectives::make_inproc_group(world);
    std::vector<Status> status(world);
    std::vector<std::vector<float>> params(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      threads.emplace_back([&, r] {
        collectives::Communicator comm(std::move(transports[r]));
        const job::LedgerFeedOptions fo = job::sync_feed_options(o.seed, o.batch_size, world, r, world);
        job::LedgerFeed feed(data, store, job, WorkerId::random(), fo);
        Replica replica;
        replica.comm = &comm;
        replica.feed = &feed;
        replica.timeout = std::chrono::seconds(30);
        auto result = train_replica(o, data, *test, replica, {}, &params[r]);
        status[r] = result.status();
        if (result.ok()) CHECK(result->steps == 100);
        CHECK(feed.data_wait_ms() >= 0);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      INFO("replica " << r << ": " << status[r].to_string());
      REQUIRE(status[r].ok());
      CHECK(params[r] == params[0]);
    }
    const double diff = relative_difference(params[0], want);
    INFO(optimizer << ": relative difference " << diff);
    CHECK(diff <= 1e-5);

    // Exactly-once accounting: each epoch's 4 shards DONE, each claimed once, by 4 different workers.
    data::ShardLedger ledger(store, job, data::ShardLedgerOptions{world});
    for (int epoch : {1, 2}) {
      auto records = ledger.epoch_status(epoch);
      REQUIRE(records.ok());
      REQUIRE(records->size() == 4u);
      std::set<WorkerId> owners;
      for (const gcs::ShardRecord& s : *records) {
        INFO("epoch " << epoch << " shard " << s.shard);
        CHECK(s.state == gcs::ShardState::done);
        CHECK(s.claims == 1);
        CHECK(s.progress == s.examples);
        owners.insert(s.owner);
      }
      CHECK(owners.size() == 4u);
    }
  }
}

TEST_CASE("async job data: workers taking stratified shards as they get to them train every shard exactly once",
          "[jobs][feed][async]") {
  Dataset part, test_set;
  load_prefix(12800, &part, &test_set);
  const Dataset* test = &test_set;
  TrainOptions o;
  o.epochs = 2;
  o.batch_size = 128;
  o.seed = 9;
  const int workers = 4, servers = 2, shards = 16;
  ps::PsJobShape shape;
  shape.workers = workers;
  shape.shards = servers;
  shape.train_examples = part.count;
  std::vector<std::unique_ptr<ps::ParameterShard>> owned;
  std::vector<ps::ParameterShard*> views;
  for (int s = 0; s < servers; ++s) {
    auto made = ps::make_job_shard(o, DataSpec{part.features(), part.classes}, shape, s);
    REQUIRE(made.ok());
    views.push_back(made->get());
    owned.push_back(std::move(*made));
  }
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  std::vector<Status> status(workers);
  std::vector<int64_t> steps(workers);
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r)
    threads.emplace_back([&, r] {
      auto client = ps::local_ps_client(views, r);
      job::LedgerFeedOptions fo;
      fo.plan.shards = shards;
      fo.plan.policy = data::ShardPolicy::stratified;
      fo.plan.seed = o.seed;
      fo.batch_size = o.batch_size / workers;
      job::LedgerFeed feed(part, store, job, WorkerId::random(), fo);
      ps::PsWorkerReport report;
      auto result = ps::train_ps_worker(o, part, *test, feed, ps::PsWorker{client.get(), r, workers}, {}, &report);
      status[r] = result.status();
      steps[r] = report.steps;
    });
  for (auto& t : threads) t.join();
  int64_t total_steps = 0;
  for (int r = 0; r < workers; ++r) {
    INFO("worker " << r << ": " << status[r].to_string());
    REQUIRE(status[r].ok());
    total_steps += steps[r];
  }
  // Every example of both epochs was trained, but for each worker's last partial batch per epoch.
  const int64_t batches = 2 * part.count / (o.batch_size / workers);
  CHECK(total_steps <= batches);
  CHECK(total_steps >= batches - 2 * workers);
  data::ShardLedger ledger(store, job, data::ShardLedgerOptions{shards});
  for (int epoch : {1, 2}) {
    auto records = ledger.epoch_status(epoch);
    REQUIRE(records.ok());
    REQUIRE(records->size() == static_cast<size_t>(shards));
    for (const gcs::ShardRecord& s : *records) {
      INFO("epoch " << epoch << " shard " << s.shard);
      CHECK(s.state == gcs::ShardState::done);
      CHECK(s.claims == 1);
      CHECK(s.progress == s.examples);
    }
  }
}

TEST_CASE("async job data: a replacement's epoch starts its progress where the ledger says the epoch stood",
          "[jobs][feed][async]") {
  // The job's progress is what its workers report: a worker that takes over a half-trained epoch
  // (its predecessor died) must not report the epoch from 0 again.
  Dataset part, test_set;
  load_prefix(4096, &part, &test_set);
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  job::LedgerFeedOptions fo;
  fo.plan.shards = 4;
  fo.plan.seed = 3;
  fo.batch_size = 64;
  fo.keep_partial = true;
  const WorkerId first = WorkerId::random();
  {
    job::LedgerFeed feed(part, store, job, first, fo);
    REQUIRE(feed.begin_epoch(1).ok());
    CHECK(feed.examples_done_at_start() == 0);  // a fresh epoch
    // It trains one whole shard and a part of the next, then dies.
    for (int i = 0; i < 1024 / 64 + 5; ++i) {
      Batch b;
      auto more = feed.next(&b);
      REQUIRE(more.ok());
      REQUIRE(*more);
      REQUIRE(feed.trained().ok());
    }
  }
  data::ShardLedger ledger(store, job, data::ShardLedgerOptions{4});
  auto released = ledger.release_worker(first, [](const gcs::ShardRecord& r) { return r.progress; });
  REQUIRE(released.ok());
  auto records = ledger.epoch_status(1);
  REQUIRE(records.ok());
  int64_t done = 0;
  for (const gcs::ShardRecord& r : *records) done += r.state == gcs::ShardState::done ? r.examples : r.resume_at;
  INFO("the ledger after the release: " << done << " examples of epoch 1 done");
  REQUIRE(done >= 1024);  // a shard is 1024 examples: the first one whole, and some of the second
  job::LedgerFeed next(part, store, job, WorkerId::random(), fo);
  REQUIRE(next.begin_epoch(1).ok());
  CHECK(next.examples_done_at_start() == done);
  REQUIRE(next.begin_epoch(2).ok());
  CHECK(next.examples_done_at_start() == 0);
}

TEST_CASE("sync job data: the steps a resumed worker passes over come hollow, read for nothing, with one progress "
          "report for the pass, and the steps after it are the ones a plain feed gives",
          "[jobs][feed]") {
  Dataset part, test_set;
  load_prefix(6400, &part, &test_set);  // one shard of 50 batches of 128
  gcs::InMemoryStore store;
  const job::LedgerFeedOptions fo = job::sync_feed_options(5, 128, 1, 0, 1);
  auto shard_progress = [&](const JobId& job) {
    auto records = data::ShardLedger(store, job, data::ShardLedgerOptions{1}).epoch_status(1);
    REQUIRE(records.ok());
    REQUIRE(records->size() == 1u);
    return (*records)[0].progress;
  };
  // What a feed gives at step 21 without passing over.
  const JobId plain_job = JobId::random();
  job::LedgerFeed plain(part, store, plain_job, WorkerId::random(), fo);
  REQUIRE(plain.begin_epoch(1).ok());
  Batch b;
  for (int s = 0; s < 21; ++s) {
    REQUIRE(*plain.next(&b));
    REQUIRE(plain.trained().ok());
  }
  const std::vector<float> step21(b.inputs, b.inputs + b.size * part.features());
  CHECK(shard_progress(plain_job) == 16 * 128);  // reported every 8 batches

  const JobId job = JobId::random();
  job::LedgerFeed feed(part, store, job, WorkerId::random(), fo);
  feed.pass_over(20);
  REQUIRE(feed.begin_epoch(1).ok());
  for (int s = 0; s < 20; ++s) {
    REQUIRE(*feed.next(&b));
    CHECK(b.size == 128);
    CHECK(b.inputs == nullptr);  // hollow: no rows read
    REQUIRE(feed.trained().ok());
    if (s == 15) CHECK(shard_progress(job) == 0);  // no report within the pass
  }
  CHECK(shard_progress(job) == 20 * 128);  // one at its end
  REQUIRE(*feed.next(&b));
  REQUIRE(b.inputs != nullptr);
  CHECK(std::vector<float>(b.inputs, b.inputs + b.size * part.features()) == step21);
  REQUIRE(feed.trained().ok());
  REQUIRE(feed.end_epoch().ok());
  REQUIRE(feed.begin_epoch(2).ok());  // the next epoch reads every batch again
  REQUIRE(*feed.next(&b));
  CHECK(b.inputs != nullptr);
}
