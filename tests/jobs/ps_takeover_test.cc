// A replacement async worker taking over from a predecessor that died in the middle of a push
// (trainers/job/ps_takeover.h), in process: two parameter shards, the shard ledger in an in-memory
// store, the real MLP on Fashion-MNIST. The predecessor's last push reached shard 0 only; the
// replacement pushes it again to shard 1, resumes the shards at the servers' applied offsets, and
// the accounting (gcs/async_accounting.h) proves every example applied once on both shards. Done
// the old way (released to start again at 0, no catch-up), the proof fails and names the doubles.
#include <catch2/catch.hpp>

#include "core/config.h"
#include "gcs/async_accounting.h"
#include "gcs/in_memory_store.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/job/ps_applied.h"
#include "trainers/job/ps_takeover.h"
#include "trainers/ps/async_worker.h"
#include "trainers/ps/ps_job.h"
#include "trainers/trainer_setup.h"

using namespace troupe;

namespace {

constexpr int kLedgerShards = 4;

struct Scenario {
  gcs::InMemoryStore store;
  JobId job = JobId::random();
  Dataset train, test;
  TrainOptions o;
  job::LedgerFeedOptions fo;
  std::vector<std::unique_ptr<ps::ParameterShard>> shards;

  Scenario() {
    auto loaded = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
    REQUIRE(loaded.ok());
    train = std::move(*loaded);
    train.count = 1300;  // shards of 325: batches of 64 cross from one shard into the next
    train.images.resize(static_cast<size_t>(train.count * train.features()));
    train.labels.resize(static_cast<size_t>(train.count));
    test = train;
    o.epochs = 1;
    o.batch_size = 64;
    o.seed = 3;
    o.optimizer = "sgd";
    fo.batch_size = 64;
    fo.plan.shards = kLedgerShards;
    fo.plan.seed = o.seed;
    fo.plan.block = 64;
    fo.keep_partial = true;
    ps::PsJobShape shape;
    shape.shards = 2;
    shape.train_examples = train.count;
    for (int i = 0; i < 2; ++i) {
      auto s = ps::make_job_shard(o, DataSpec{train.features(), train.classes}, shape, i);
      REQUIRE(s.ok());
      shards.push_back(std::move(*s));
    }
  }
  std::vector<ps::ParameterShard*> raw() { return {shards[0].get(), shards[1].get()}; }
};

// The predecessor: `pushes` whole pushes, then one that reaches shard 0 only, then it dies (the
// servers remove it; the replacement's hello rejoins it).
void predecessor(Scenario& s, WorkerId me, int pushes) {
  auto client = ps::local_ps_client(s.raw(), 0);
  job::LedgerFeed feed(s.train, s.store, s.job, me, s.fo);
  REQUIRE(feed.begin_epoch(1).ok());
  auto setup = set_up_trainer(s.o, DataSpec{s.train.features(), s.train.classes}, 0, 1);
  REQUIRE(setup.ok());
  const size_t n = setup->space.size();
  std::vector<float> params(n), grads(n);
  for (int c = 0; c <= pushes; ++c) {
    Batch batch;
    auto more = feed.next(&batch);
    REQUIRE(more.ok());
    REQUIRE(*more);
    auto versions = client->pull(c, params.data());
    REQUIRE(versions.ok());
    std::fill(grads.begin(), grads.end(), 0.0f);
    Gradients g(grads.data(), n);
    REQUIRE(setup->trainer->forward_backward(batch, Parameters(params.data(), n), g).ok());
    if (c == pushes) {
      REQUIRE(client->push_to({0}, c, grads.data(), *versions, feed.position()).ok());
      break;  // killed before reaching shard 1 and before telling the ledger
    }
    REQUIRE(client->push(c, grads.data(), *versions, feed.position()).ok());
    REQUIRE(feed.trained().ok());
  }
  for (auto* shard : s.raw()) {
    shard->remove_worker(0, "its node was killed");
    REQUIRE(shard->rejoin_worker(0).ok());
  }
}

// The replacement trains the rest of the epoch and finishes; every shard records its applied data.
Expected<gcs::AsyncAccountingReport> replace_and_finish(Scenario& s, WorkerId me, bool take_over) {
  auto client = ps::local_ps_client(s.raw(), 0);
  data::ShardLedger ledger(s.store, s.job, data::ShardLedgerOptions{kLedgerShards});
  if (take_over) {
    auto t = job::take_over(*client, s.o, s.train, s.fo.plan, ledger, me, 0, 1);
    REQUIRE(t.ok());
    INFO(t->summary);
    CHECK(t->caught_up == 1);
    CHECK(t->resumed_mid_shard >= 1);
  } else {
    REQUIRE(ledger.release_worker(me).ok());  // the old way: from example 0, the last push half-done
  }
  job::LedgerFeed feed(s.train, s.store, s.job, me, s.fo);
  ps::PsWorker w{client.get(), 0, 1};
  w.evaluate = false;
  w.start_clock = client->start_clock();
  auto result = ps::train_ps_worker(s.o, s.train, s.test, feed, w);
  INFO(result.status().to_string());
  REQUIRE(result.ok());
  for (int i = 0; i < 2; ++i) REQUIRE(job::publish_applied(s.store, s.job, i, 0, *s.shards[i]).ok());
  REQUIRE(job::wait_for_applied(s.store, s.job, 2, std::chrono::milliseconds(100)).ok());
  return gcs::account_async_job(s.store, s.job, 1, kLedgerShards, 2);
}

}  // namespace

TEST_CASE("ps takeover: a push that reached one server is completed, shards resume where applied data ends",
          "[jobs][ps][accounting]") {
  Scenario s;
  const WorkerId me = WorkerId::random();
  predecessor(s, me, 7);
  CHECK(s.shards[0]->version() == 8);
  CHECK(s.shards[1]->version() == 7);
  auto report = replace_and_finish(s, me, true);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->examples == 1300);
  CHECK(s.shards[0]->version() == s.shards[1]->version());  // every push applied on both
}

TEST_CASE("ps takeover: without it (release to 0, no catch-up) the accounting names the doubled examples",
          "[jobs][ps][accounting]") {
  Scenario s;
  const WorkerId me = WorkerId::random();
  predecessor(s, me, 7);
  auto report = replace_and_finish(s, me, false);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK_FALSE(report->exactly_once);
  CHECK(report->summary().find("of them twice") != std::string::npos);
}
