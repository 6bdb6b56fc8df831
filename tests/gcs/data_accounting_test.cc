// Exactly-once data accounting (gcs/data_accounting.h): durable stretches recorded per epoch, a
// restart's rollback discarding what the failed attempt recorded past its checkpoint, and the proof
// naming every gap, doubled stretch and unfinished shard.
#include <catch2/catch.hpp>

#include "gcs/data_accounting.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"
#include "tests/gcs/done_shards.h"

using namespace troupe;
using namespace troupe::gcs;

using troupe::gcs::testing::shards_done;

TEST_CASE("data accounting: stretches split at epoch ends and a clean job is proven exactly once", "[gcs][accounting]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  // 3 epochs of 10 steps: durable at steps 4, 25 (a checkpoint in epoch 3), then the end.
  REQUIRE(record_trained(store, job, 0, 1, 0, 1, 4, 10, 4).ok());
  REQUIRE(record_trained(store, job, 0, 1, 4, 3, 5, 10, 25).ok());
  REQUIRE(record_trained(store, job, 0, 3, 5, 3, 10, 10, 30).ok());
  auto ranges = trained_ranges(store, job);
  REQUIRE(ranges.ok());
  REQUIRE(ranges->size() == 5u);  // [0,4) [4,10) | [0,10) | [0,5) [5,10)
  CHECK(ranges->at(1).epoch == 1);
  CHECK(ranges->at(1).first_step == 4);
  CHECK(ranges->at(1).end_step == 10);
  CHECK(ranges->at(1).global_end_step == 10);
  CHECK(ranges->at(2).global_end_step == 20);
  shards_done(store, job, 3, 2);
  auto report = account_sync_job(store, job, 30, 10, 2);
  REQUIRE(report.ok());
  CHECK(report->exactly_once);
  CHECK(report->problems.empty());
  CHECK(report->epochs == 3);
  CHECK(report->summary().find("every shard of epochs 1-3 trained exactly once") != std::string::npos);
  // Another job's ranges are not this one's.
  REQUIRE(record_trained(store, JobId::random(), 0, 1, 0, 1, 10, 10, 10).ok());
  CHECK(account_sync_job(store, job, 30, 10, 2)->exactly_once);
}

TEST_CASE("data accounting: a restart discards the failed attempt's stretches past its checkpoint", "[gcs][accounting]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  REQUIRE(record_trained(store, job, 0, 1, 0, 1, 6, 10, 6).ok());    // checkpoint at 6
  REQUIRE(record_trained(store, job, 0, 1, 6, 2, 10, 10, 20).ok());  // recorded, then the job died
  // Attempt 1 resumes from the checkpoint of step 6: what came after goes.
  auto dropped = discard_ranges_after(store, job, 6);
  REQUIRE(dropped.ok());
  CHECK(*dropped == 2);
  REQUIRE(record_trained(store, job, 1, 1, 6, 2, 10, 10, 20).ok());
  shards_done(store, job, 2, 1, 2);
  auto report = account_sync_job(store, job, 20, 10, 1);
  REQUIRE(report.ok());
  CHECK(report->exactly_once);
  CHECK(report->attempts == 2);
  CHECK(report->reclaimed_shards == 2);
}

TEST_CASE("data accounting: gaps, doubled steps and unfinished shards are each named", "[gcs][accounting]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  REQUIRE(record_trained(store, job, 0, 1, 0, 1, 6, 10, 6).ok());
  REQUIRE(record_trained(store, job, 1, 1, 4, 1, 10, 10, 12).ok());  // steps 4-5 twice
  REQUIRE(record_trained(store, job, 1, 2, 0, 2, 7, 10, 19).ok());   // 7-9 never
  shards_done(store, job, 2, 2);
  ShardRecord open;
  open.job = job;
  open.epoch = 2;
  open.shard = 1;
  open.state = ShardState::assigned;
  REQUIRE(Table<ShardRecord>(store).put(open).ok());
  auto report = account_sync_job(store, job, 20, 10, 3);  // shard 2 was never recorded at all
  REQUIRE(report.ok());
  CHECK_FALSE(report->exactly_once);
  const std::string all = report->summary();
  INFO(all);
  CHECK(all.find("epoch 1: steps 4-5 kept twice (attempt 1)") != std::string::npos);
  CHECK(all.find("epoch 2: steps 7-9 never kept") != std::string::npos);
  CHECK(all.find("shard 1 of epoch 2 is ASSIGNED, not DONE") != std::string::npos);
  CHECK(all.find("shard 2 of epoch 1 was never recorded") != std::string::npos);
  CHECK_FALSE(record_trained(store, job, 0, 2, 5, 1, 3, 10, 4).ok());  // backwards
  CHECK_FALSE(account_sync_job(store, job, 0, 10, 1).ok());
}

TEST_CASE("data accounting: a job without a shard ledger (a pipeline) is proven by its steps alone", "[gcs][accounting]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  REQUIRE(record_trained(store, job, 0, 1, 0, 1, 8, 10, 8).ok());    // checkpoint at 8
  REQUIRE(record_trained(store, job, 1, 1, 8, 2, 10, 10, 20).ok());  // a restart from it, to the end
  auto report = account_sync_job(store, job, 20, 10, 0);  // no shard records at all: none are asked for
  REQUIRE(report.ok());
  CHECK(report->exactly_once);
  CHECK(report->attempts == 2);
  CHECK(report->summary().find("every step of epochs 1-2 trained exactly once") != std::string::npos);
  // A step kept twice is still caught.
  REQUIRE(record_trained(store, job, 1, 2, 5, 2, 7, 10, 17).ok());
  auto doubled = account_sync_job(store, job, 20, 10, 0);
  REQUIRE(doubled.ok());
  CHECK_FALSE(doubled->exactly_once);
  CHECK(doubled->summary().find("kept twice") != std::string::npos);
  CHECK(account_sync_job(store, job, 20, 10, -1).status().code() == Code::invalid_argument);
}
