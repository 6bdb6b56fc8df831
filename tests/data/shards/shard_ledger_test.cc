// The shard ledger over both stores: the lifecycle of a shard, what a worker that does not hold a
// shard is told, release of a dead worker's shards, and claims racing from threads (one shared
// in-memory store; one Redis connection per thread, as separate processes would have).
#include "data/shards/shard_ledger.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "gcs/in_memory_store.h"
#include "data/feed/input_pipeline.h"
#include "data/shards/shard_source.h"
#include "tests/gcs/redis_fixture.h"

namespace troupe::data {
namespace {

using gcs::ShardRecord;
using gcs::ShardState;

ShardLedgerOptions with_shards(int shards) {
  ShardLedgerOptions o;
  o.shards = shards;
  return o;
}

void lifecycle(gcs::Store& store) {
  ShardLedger ledger(store, JobId::random(), with_shards(3));
  const WorkerId a = WorkerId::random(), b = WorkerId::random();
  CHECK(ledger.claim(1, a).status().code() == Code::not_found);  // not created yet
  CHECK(ledger.epoch_done(1).status().code() == Code::not_found);
  REQUIRE(ledger.create_epoch(1, {10, 10, 9}).ok());

  // Claims go lowest shard first, each to one worker.
  auto c0 = ledger.claim(1, a);
  REQUIRE(c0.ok());
  REQUIRE(c0->has_value());
  CHECK((*c0)->shard == 0);
  CHECK((*c0)->owner == a);
  CHECK((*c0)->state == ShardState::assigned);
  CHECK((*c0)->claims == 1);
  CHECK((*c0)->examples == 10);
  auto c1 = ledger.claim(1, b);
  REQUIRE(c1->has_value());
  CHECK((*c1)->shard == 1);

  REQUIRE(ledger.report_progress(1, 0, a, 4).ok());
  auto status = ledger.epoch_status(1);
  REQUIRE(status.ok());
  REQUIRE(status->size() == 3);
  CHECK((*status)[0].progress == 4);
  CHECK((*status)[0].owner == a);
  CHECK((*status)[1].owner == b);
  CHECK((*status)[2].state == ShardState::unassigned);

  // A supervisor that restarts and creates the epoch again resets nothing.
  REQUIRE(ledger.create_epoch(1, {10, 10, 9}).ok());
  CHECK((*ledger.epoch_status(1))[0].progress == 4);

  REQUIRE(ledger.complete(1, 0, a).ok());
  REQUIRE(ledger.complete(1, 0, a).ok());  // a retry is fine
  CHECK((*ledger.epoch_status(1))[0].progress == 10);
  CHECK((*ledger.epoch_status(1))[0].state == ShardState::done);
  CHECK_FALSE(*ledger.epoch_done(1));
  auto c2 = ledger.claim(1, a);
  REQUIRE(c2->has_value());
  CHECK((*c2)->shard == 2);
  CHECK_FALSE(ledger.claim(1, a)->has_value());  // nothing left unassigned
  REQUIRE(ledger.complete(1, 1, b).ok());
  REQUIRE(ledger.complete(1, 2, a).ok());
  CHECK(*ledger.epoch_done(1));
}

void refusals(gcs::Store& store) {
  ShardLedger ledger(store, JobId::random(), with_shards(2));
  const WorkerId a = WorkerId::random(), b = WorkerId::random();
  CHECK(ledger.create_epoch(1, {5}).code() == Code::invalid_argument);
  CHECK(ledger.create_epoch(1, {5, -1}).code() == Code::invalid_argument);
  REQUIRE(ledger.create_epoch(1, {5, 5}).ok());
  REQUIRE(ledger.claim(1, a)->has_value());

  Status st = ledger.report_progress(1, 0, b, 1);
  CHECK(st.code() == Code::not_found);
  CHECK_THAT(st.message(), Catch::Contains("worker " + b.short_hex() + " does not hold shard 0 of epoch 1"));
  CHECK_THAT(st.message(), Catch::Contains("ASSIGNED (worker " + a.short_hex() + ")"));
  CHECK(ledger.complete(1, 1, a).code() == Code::not_found);  // unassigned: never claimed
  CHECK(ledger.report_progress(1, 0, a, 6).code() == Code::invalid_argument);
  CHECK(ledger.report_progress(1, 7, a, 0).code() == Code::not_found);
  CHECK(ledger.claim(1, WorkerId()).status().code() == Code::invalid_argument);
}

void release(gcs::Store& store) {
  const JobId job = JobId::random();
  ShardLedger ledger(store, job, with_shards(3));
  ShardLedger other_job(store, JobId::random(), with_shards(3));
  const WorkerId dead = WorkerId::random(), live = WorkerId::random();
  REQUIRE(ledger.create_epoch(1, {8, 8, 8}).ok());
  REQUIRE(other_job.create_epoch(1, {8, 8, 8}).ok());
  REQUIRE(ledger.claim(1, dead)->has_value());   // shard 0
  REQUIRE(ledger.claim(1, live)->has_value());   // shard 1
  REQUIRE(ledger.claim(1, dead)->has_value());   // shard 2
  REQUIRE(other_job.claim(1, dead)->has_value());
  REQUIRE(ledger.report_progress(1, 2, dead, 5).ok());
  REQUIRE(ledger.complete(1, 0, dead).ok());     // done before it died: stays done

  auto released = ledger.release_worker(dead);
  REQUIRE(released.ok());
  REQUIRE(released->size() == 1);
  CHECK((*released)[0].shard == 2);
  CHECK((*released)[0].state == ShardState::unassigned);
  CHECK((*released)[0].owner.nil());
  CHECK((*released)[0].progress == 5);  // kept for status until the next claim
  CHECK((*other_job.epoch_status(1))[0].owner == dead);  // another job's shards are not touched
  CHECK(ledger.release_worker(WorkerId::random())->empty());

  // The dead worker's late reports are refused; the next owner restarts the shard from 0.
  CHECK(ledger.report_progress(1, 2, dead, 6).code() == Code::not_found);
  CHECK(ledger.complete(1, 2, dead).code() == Code::not_found);
  auto again = ledger.claim(1, live);
  REQUIRE(again->has_value());
  CHECK((*again)->shard == 2);
  CHECK((*again)->progress == 0);
  CHECK((*again)->claims == 2);
  CHECK((*ledger.epoch_status(1))[0].state == ShardState::done);
}

// `threads` workers claim until nothing is left, each through store_of(t); every shard must be
// claimed by exactly one of them.
void racing_claims(const std::function<gcs::Store&(int)>& store_of, int threads, int shards) {
  const JobId job = JobId::random();
  REQUIRE(ShardLedger(store_of(0), job, with_shards(shards)).create_epoch(3, std::vector<int64_t>(shards, 1)).ok());
  std::mutex mu;
  std::vector<int> claimed_by(static_cast<size_t>(shards), 0);
  std::atomic<int> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ShardLedger ledger(store_of(t), job, with_shards(shards));
      const WorkerId me = WorkerId::random();
      while (true) {
        auto c = ledger.claim(3, me);
        if (!c.ok()) {
          ++errors;
          return;
        }
        if (!c->has_value()) return;
        {
          std::lock_guard<std::mutex> lock(mu);
          ++claimed_by[static_cast<size_t>((*c)->shard)];
        }
        if (!ledger.complete(3, (*c)->shard, me).ok()) ++errors;
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(errors == 0);
  for (int s = 0; s < shards; ++s) {
    INFO("shard " << s);
    CHECK(claimed_by[static_cast<size_t>(s)] == 1);
  }
  CHECK(*ShardLedger(store_of(0), job, with_shards(shards)).epoch_done(3));
}

// Lockstep claims by name: a worker gets its own shard whoever asks first, one left ASSIGNED by an
// earlier attempt's worker is taken over (the stale holder's reports refused), a DONE one gives
// nothing, and a shard outside the epoch is not found. A ShardSource with a name gives that shard once.
void named_claims(gcs::Store& store) {
  ShardLedger ledger(store, JobId::random(), with_shards(4));
  const WorkerId a = WorkerId::random(), b = WorkerId::random(), stale = WorkerId::random();
  CHECK(ledger.claim_shard(1, 2, a).status().code() == Code::not_found);  // epoch not created
  REQUIRE(ledger.create_epoch(1, {10, 10, 10, 10}).ok());
  CHECK(ledger.claim_shard(1, 4, a).status().code() == Code::not_found);
  CHECK(ledger.claim_shard(1, -1, a).status().code() == Code::not_found);
  CHECK(ledger.claim_shard(1, 0, WorkerId()).status().code() == Code::invalid_argument);

  auto c3 = ledger.claim_shard(1, 3, a);  // the highest first: no lower free shard is taken instead
  REQUIRE(c3.ok());
  REQUIRE(c3->has_value());
  CHECK((*c3)->shard == 3);
  CHECK((*c3)->owner == a);
  CHECK((*c3)->state == ShardState::assigned);
  CHECK((*c3)->claims == 1);
  CHECK((*c3)->updated_ms == (*ledger.epoch_status(1))[3].updated_ms);  // the record as stored
  CHECK((*ledger.epoch_status(1))[0].state == ShardState::unassigned);

  // Shard 1 held by an earlier attempt's worker (it reported 6 examples) is taken over from 0.
  auto held = ledger.claim_shard(1, 1, stale);
  REQUIRE(held.ok());
  REQUIRE(ledger.report_progress(1, 1, stale, 6).ok());
  auto c1 = ledger.claim_shard(1, 1, b);
  REQUIRE(c1.ok());
  REQUIRE(c1->has_value());
  CHECK((*c1)->owner == b);
  CHECK((*c1)->progress == 0);
  CHECK((*c1)->claims == 2);
  CHECK(ledger.report_progress(1, 1, stale, 8).code() == Code::not_found);
  CHECK(ledger.complete(1, 1, stale).code() == Code::not_found);

  // DONE: nothing to claim, and the record is left as it was.
  REQUIRE(ledger.complete(1, 3, a).ok());
  auto again = ledger.claim_shard(1, 3, b);
  REQUIRE(again.ok());
  CHECK(!again->has_value());
  CHECK((*ledger.epoch_status(1))[3].owner == a);
  CHECK((*ledger.epoch_status(1))[3].state == ShardState::done);

  // A source named shard 2 gives shard 2's indices once, then its end.
  ShardPlan plan;
  plan.epoch = 1;
  plan.shards = {{0}, {1}, {2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {12}};
  ShardSource source(ledger, plan, b, 2);
  auto first = source.next();
  REQUIRE(first.ok());
  REQUIRE(first->has_value());
  CHECK((*first)->tag == 2);
  CHECK((*first)->indices.size() == 10);
  auto end = source.next();
  REQUIRE(end.ok());
  CHECK(!end->has_value());
  CHECK((*ledger.epoch_status(1))[0].state == ShardState::unassigned);  // never claimed by the source
}

}  // namespace

TEST_CASE("shard ledger in memory: create, claim in order, progress, complete, epoch done", "[data][ledger]") {
  gcs::InMemoryStore store;
  lifecycle(store);
}

TEST_CASE("shard ledger in memory: bad sizes, foreign workers and out-of-range progress are refused", "[data][ledger]") {
  gcs::InMemoryStore store;
  refusals(store);
}

TEST_CASE("shard ledger in memory: release_worker returns only the dead worker's unfinished shards", "[data][ledger]") {
  gcs::InMemoryStore store;
  release(store);
}

TEST_CASE("shard ledger in memory: a lockstep worker claims its shard by name, taking it over from a stale holder",
          "[data][ledger]") {
  gcs::InMemoryStore store;
  named_claims(store);
}

TEST_CASE("shard ledger over redis: a lockstep worker claims its shard by name, taking it over from a stale holder",
          "[data][ledger][redis]") {
  auto store = gcs::testing::connect_store(gcs::testing::shared_redis(), "t-ledger-named");
  named_claims(*store);
}

TEST_CASE("shard ledger in memory: racing threads claim every shard exactly once", "[data][ledger]") {
  gcs::InMemoryStore store;
  racing_claims([&](int) -> gcs::Store& { return store; }, 8, 64);
}

TEST_CASE("shard ledger in memory: a store that is down fails claims as unavailable, naming the shard", "[data][ledger]") {
  gcs::InMemoryStore store;
  ShardLedger ledger(store, JobId::random(), with_shards(2));
  REQUIRE(ledger.create_epoch(1, {1, 1}).ok());
  store.set_down(true);
  Status st = ledger.claim(1, WorkerId::random()).status();
  CHECK(st.code() == Code::unavailable);
  CHECK_THAT(st.message(), Catch::Contains("shard 0 of epoch 1"));
}

TEST_CASE("shard ledger over redis: create, claim in order, progress, complete, epoch done", "[data][ledger][redis]") {
  auto store = gcs::testing::connect_store(gcs::testing::shared_redis(), "t-ledger-life");
  lifecycle(*store);
}

TEST_CASE("shard ledger over redis: refusals and release_worker", "[data][ledger][redis]") {
  auto store = gcs::testing::connect_store(gcs::testing::shared_redis(), "t-ledger-release");
  refusals(*store);
  release(*store);
}

TEST_CASE("shard ledger over redis: workers on separate connections claim every shard exactly once", "[data][ledger][redis]") {
  std::vector<std::unique_ptr<gcs::RedisStore>> stores;
  for (int i = 0; i < 6; ++i) stores.push_back(gcs::testing::connect_store(gcs::testing::shared_redis(), "t-ledger-race"));
  racing_claims([&](int t) -> gcs::Store& { return *stores[static_cast<size_t>(t)]; }, 6, 48);
}

TEST_CASE("shard ledger in memory: rewind returns the shards of later epochs, done or held, to be claimed again",
          "[data][ledger]") {
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  ShardLedger ledger(store, job, with_shards(2));
  const WorkerId a = WorkerId::random(), b = WorkerId::random();
  for (int epoch = 1; epoch <= 3; ++epoch) REQUIRE(ledger.create_epoch(epoch, {10, 10}).ok());
  for (int epoch = 1; epoch <= 2; ++epoch) {  // epochs 1 and 2 done, epoch 3 half trained
    for (const WorkerId& w : {a, b}) {
      auto s = ledger.claim(epoch, w);
      REQUIRE(s.ok());
      REQUIRE(s->has_value());
      REQUIRE(ledger.complete(epoch, (*s)->shard, w).ok());
    }
  }
  auto held = ledger.claim(3, a);
  REQUIRE(held.ok());
  REQUIRE(ledger.report_progress(3, (*held)->shard, a, 5).ok());
  // The restart resumes from a checkpoint taken in epoch 2.
  auto reset = ledger.rewind(2);
  REQUIRE(reset.ok());
  CHECK(*reset == 3);  // epoch 2's two DONE shards and epoch 3's held one
  CHECK(*ledger.epoch_done(1));
  auto two = ledger.epoch_status(2);
  REQUIRE(two.ok());
  for (const gcs::ShardRecord& r : *two) {
    CHECK(r.state == gcs::ShardState::unassigned);
    CHECK(r.owner == WorkerId());
  }
  // Claimed again by the new attempt's workers: claims count the repeat.
  auto again = ledger.claim(2, WorkerId::random());
  REQUIRE(again.ok());
  REQUIRE(again->has_value());
  CHECK((*again)->claims == 2);
  CHECK((*again)->progress == 0);
  CHECK(*ledger.rewind(5) == 0);  // nothing recorded there
}


TEST_CASE("shard ledger in memory: a shard released at an offset is claimed there, and the pipeline starts there",
          "[data][ledger][accounting]") {
  gcs::InMemoryStore store;
  ShardLedger ledger(store, JobId::random(), with_shards(2));
  REQUIRE(ledger.create_epoch(1, {10, 6}).ok());
  const WorkerId dead = WorkerId::random(), next = WorkerId::random();
  REQUIRE(ledger.claim(1, dead)->has_value());
  REQUIRE(ledger.claim(1, dead)->has_value());
  // The servers applied 7 examples of shard 0 and none of shard 1.
  auto released = ledger.release_worker(dead, [](const ShardRecord& r) { return r.shard == 0 ? int64_t{7} : r.resume_at; });
  REQUIRE(released.ok());
  REQUIRE(released->size() == 2);
  CHECK((*released)[0].resume_at == 7);
  CHECK((*released)[1].resume_at == 0);
  // An offset outside the shard is refused, naming it.
  REQUIRE(ledger.claim(1, dead)->has_value());
  Status bad = ledger.release_worker(dead, [](const ShardRecord&) { return int64_t{11}; }).status();
  CHECK(bad.code() == Code::invalid_argument);
  CHECK_THAT(bad.message(), Catch::Contains("shard 0 of epoch 1") && Catch::Contains("resuming at example 11"));
  REQUIRE(ledger.release_worker(dead, [](const ShardRecord&) { return int64_t{7}; }).ok());

  // The next claim starts at the offset; the pipeline cuts the shard from there, saying where.
  Dataset data;
  data.count = 16;
  data.rows = data.cols = 1;
  data.images.assign(16, 0.0f);
  data.labels.assign(16, 0);
  ShardPlan plan;
  plan.epoch = 1;
  plan.shards = {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12, 13, 14, 15}};
  InputPipelineOptions po;
  po.batch_size = 4;
  po.threads = 1;
  po.partial = PartialBatch::keep;
  auto pipeline = InputPipeline::start(data, std::make_unique<ShardSource>(ledger, plan, next), po);
  REQUIRE(pipeline.ok());
  auto b = (*pipeline)->next();
  REQUIRE(b.ok());
  REQUIRE(b->has_value());
  CHECK((**b).indices == std::vector<int32_t>{7, 8, 9, 10});  // shard 0 from 7, then shard 1 from 0
  REQUIRE((**b).progress.size() == 2);
  CHECK((**b).progress[0].first == 7);
  CHECK((**b).progress[0].done == 10);
  CHECK((**b).progress[1].first == 0);
  CHECK((**b).progress[1].done == 1);
  auto status = ledger.epoch_status(1);
  REQUIRE(status.ok());
  CHECK((*status)[0].progress == 7);  // the claim's start
  CHECK((*status)[0].claims == 3);
  // A rewind (a sync restart) forgets the offset.
  REQUIRE(ledger.rewind(1).ok());
  CHECK(ledger.epoch_status(1)->front().resume_at == 0);
}

}  // namespace troupe::data
