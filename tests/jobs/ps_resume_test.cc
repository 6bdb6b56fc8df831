// An async job resumed from another job's checkpoint (trainers/job/ps_resume.h), in process: the
// old job's two workers leave the servers' shard files of one version holding different pushes
// (worker A's last push reached shard 0 first, worker B's shard 1), the "cluster" is gone, and a
// new job restores both servers from that checkpoint. Each server catches up what the other had
// applied, server 0 records the new ledger from it, the new workers train what is left, and the
// accounting (gcs/async_accounting.h) proves every example of the epoch applied once on both.
#include <catch2/catch.hpp>

#include <thread>

#include "gcs/async_accounting.h"
#include "gcs/in_memory_store.h"
#include "data/shards/shard_ledger.h"
#include "tests/jobs/ps_scenario.h"
#include "trainers/job/ps_applied.h"
#include "trainers/job/ps_resume.h"
#include "trainers/ps/async_worker.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
using troupe::testing::kPsLedgerShards;
using troupe::testing::PsScenario;

namespace {

// One step of worker `w` up to its gradient: the batch pulled, the gradient computed.
struct Step {
  ps::Versions versions;
  DataTag tag;
};
Step compute(ps::PsClient& client, job::LedgerFeed& feed, Trainer& trainer, int64_t clock, std::vector<float>& params,
             std::vector<float>& grads) {
  Batch batch;
  auto more = feed.next(&batch);
  REQUIRE(more.ok());
  REQUIRE(*more);
  auto v = client.pull(clock, params.data());
  REQUIRE(v.ok());
  std::fill(grads.begin(), grads.end(), 0.0f);
  Gradients g(grads.data(), grads.size());
  REQUIRE(trainer.forward_backward(batch, Parameters(params.data(), params.size()), g).ok());
  return Step{*v, feed.position()};
}

}  // namespace

TEST_CASE("ps resume: servers restored from another job's checkpoint catch each other up, and the new job is "
          "accounted exactly once",
          "[jobs][ps][accounting][resume]") {
  PsScenario old(2);
  troupe::testing::PsCheckpointFiles files;
  for (int i = 0; i < 2; ++i) REQUIRE(old.shards[i]->enable_checkpoints(files.every(5, i, old.job.hex())).ok());
  auto a = ps::local_ps_client(old.raw(), 0), b = ps::local_ps_client(old.raw(), 1);
  job::LedgerFeed fa(old.train, old.store, old.job, WorkerId::random(), old.fo);
  job::LedgerFeed fb(old.train, old.store, old.job, WorkerId::random(), old.fo);
  REQUIRE(fa.begin_epoch(1).ok());
  REQUIRE(fb.begin_epoch(1).ok());
  auto setup = set_up_trainer(old.o, DataSpec{old.train.features(), old.train.classes}, 0, 2);
  REQUIRE(setup.ok());
  const size_t n = setup->space.size();
  std::vector<float> pa(n), ga(n), pb(n), gb(n);
  for (int64_t clock = 0; clock < 2; ++clock) {  // versions 4 on both
    Step sa = compute(*a, fa, *setup->trainer, clock, pa, ga);
    REQUIRE(a->push(clock, ga.data(), sa.versions, sa.tag).ok());
    REQUIRE(fa.trained().ok());
    Step sb = compute(*b, fb, *setup->trainer, clock, pb, gb);
    REQUIRE(b->push(clock, gb.data(), sb.versions, sb.tag).ok());
    REQUIRE(fb.trained().ok());
  }
  // Clock 2: A's push reaches shard 0 first (its version 5: A's three pushes, B's two), B's shard 1
  // (version 5: B's three, A's two); then each reaches the other.
  Step sa = compute(*a, fa, *setup->trainer, 2, pa, ga);
  Step sb = compute(*b, fb, *setup->trainer, 2, pb, gb);
  REQUIRE(a->push_to({0}, 2, ga.data(), sa.versions, sa.tag).ok());
  REQUIRE(b->push_to({1}, 2, gb.data(), sb.versions, sb.tag).ok());
  REQUIRE(b->push_to({0}, 2, gb.data(), sb.versions, sb.tag).ok());
  REQUIRE(a->push_to({1}, 2, ga.data(), sa.versions, sa.tag).ok());
  const checkpoint::TrainingState state = files.load(5, old.job.hex());

  // The new job, on the same (surviving) GCS.
  PsScenario fresh(2);
  const JobId job = JobId::random();
  auto resumed = job::resumed_data(state, 2, 2);
  REQUIRE(resumed.ok());
  CHECK(resumed->last_epoch == 1);
  int64_t examples = 0;
  for (const auto& [key, count] : resumed->applied) examples += count;
  CHECK(examples == 6 * 32);  // three pushes of 32 rows by each worker
  CHECK(job::resumed_data(state, 3, 2).status().code() == Code::invalid_argument);  // another --ps
  CHECK(job::resumed_data(state, 2, 4).status().code() == Code::invalid_argument);  // another --workers
  for (int i = 0; i < 2; ++i) {
    REQUIRE(fresh.shards[i]->restore(state).ok());
    auto caught = job::catch_up_shard(*fresh.shards[i], i, state, *resumed, fresh.o, fresh.train, fresh.fo.plan, 2,
                                      fresh.fo.batch_size);
    INFO(caught.status().to_string());
    REQUIRE(caught.ok());
    CHECK(*caught == 1);  // the other worker's push of clock 2
    CHECK(fresh.shards[i]->version() == 6);
    CHECK(fresh.shards[i]->position(0).last_clock == -1);  // the old job's workers are forgotten
    for (int r = 0; r < 2; ++r) REQUIRE(*fresh.shards[i]->rejoin_worker(r, 0) == 0);  // their hellos
  }
  REQUIRE(job::seed_ledger(old.store, job, *resumed, fresh.train, fresh.fo.plan).ok());
  auto first = job::first_open_epoch(old.store, job, kPsLedgerShards, 1);
  REQUIRE(first.ok());
  CHECK(*first == 1);  // (its only epoch; the ledger's side is shown below)

  // The new job's workers train what is left of the epoch, side by side.
  Expected<TrainResult> results[2] = {Status(Code::internal, "not run"), Status(Code::internal, "not run")};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto client = ps::local_ps_client(fresh.raw(), r);
      job::LedgerFeed feed(fresh.train, old.store, job, WorkerId::random(), fresh.fo);
      ps::PsWorker w{client.get(), r, 2};
      w.evaluate = false;
      w.first_epoch = *first;
      results[r] = ps::train_ps_worker(fresh.o, fresh.train, fresh.test, feed, w);
    });
  }
  for (auto& t : threads) t.join();
  for (auto& r : results) {
    INFO(r.status().to_string());
    REQUIRE(r.ok());
  }
  for (int i = 0; i < 2; ++i) REQUIRE(job::publish_applied(old.store, job, i, 0, *fresh.shards[i]).ok());
  auto report = gcs::account_async_job(old.store, job, 1, kPsLedgerShards, 2);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->examples == 1300);
  CHECK(fresh.shards[0]->version() == fresh.shards[1]->version());
}

TEST_CASE("ps resume: the new job's ledger starts where the training stopped", "[jobs][ps][resume]") {
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  data::ShardLedger ledger(store, job, data::ShardLedgerOptions{3});
  REQUIRE(ledger.create_resumed_epoch(1, {10, 10, 10}, {10, 10, 10}).ok());  // trained whole
  REQUIRE(ledger.create_resumed_epoch(2, {10, 10, 10}, {10, 4, 0}).ok());    // stopped in it
  CHECK(ledger.create_resumed_epoch(3, {10, 10, 10}, {11, 0, 0}).code() == Code::invalid_argument);
  CHECK(ledger.create_resumed_epoch(3, {10, 10}, {0, 0}).code() == Code::invalid_argument);
  auto first = job::first_open_epoch(store, job, 3, 4);
  REQUIRE(first.ok());
  CHECK(*first == 2);
  const WorkerId w = WorkerId::random();
  auto none = ledger.claim(1, w);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());  // nothing left of epoch 1
  auto claimed = ledger.claim(2, w);
  REQUIRE(claimed.ok());
  REQUIRE(claimed->has_value());
  CHECK((*claimed)->shard == 1);
  CHECK((*claimed)->progress == 4);  // it goes on at example 4
  // Recording the epoch again (another server of the job, or a restarted one) changes nothing.
  REQUIRE(ledger.create_resumed_epoch(2, {10, 10, 10}, {10, 0, 0}).ok());
  auto again = ledger.epoch_status(2);
  REQUIRE(again.ok());
  CHECK((*again)[1].owner == w);
  CHECK((*again)[0].state == gcs::ShardState::done);
  // Every epoch done: the last one (nothing left to train).
  data::ShardLedger whole(store, JobId::random(), data::ShardLedgerOptions{1});
  REQUIRE(whole.create_resumed_epoch(1, {5}, {5}).ok());
  auto last = job::first_open_epoch(store, whole.job(), 1, 1);
  REQUIRE(last.ok());
  CHECK(*last == 1);
}
