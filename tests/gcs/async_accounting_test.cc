// Exactly-once data accounting of an async job (gcs/async_accounting.h): the servers' records of
// applied examples against the ledger's shards, proven, or each missing, doubled, skipped or
// unprovable piece named.
#include <catch2/catch.hpp>

#include "gcs/async_accounting.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"
#include "tests/gcs/done_shards.h"

using namespace troupe;
using namespace troupe::gcs;

namespace {

// Every shard of epochs 1..epochs DONE, 100 examples each; shard 1 of epoch 1 resumed mid-shard.
void ledger_done(Store& store, const JobId& job, int epochs, int shards) {
  gcs::testing::shards_done(store, job, epochs, shards);
  auto r = Table<ShardRecord>(store).get(job.hex() + "/1/1");
  REQUIRE(r.ok());
  r->claims = 2;
  r->resume_at = 40;
  REQUIRE(Table<ShardRecord>(store).put(*r).ok());
}

// Server `server`'s record: every shard's 100 examples applied once.
PsAppliedRecord all_applied(const JobId& job, int server, int epochs, int shards) {
  PsAppliedRecord r;
  r.job = job;
  r.server = server;
  for (int e = 1; e <= epochs; ++e)
    for (int s = 0; s < shards; ++s) r.shards.push_back(AppliedCount{e, s, 100, 0, 0});
  return r;
}

}  // namespace

TEST_CASE("async accounting: every shard applied once on every server is proven exactly once", "[gcs][accounting]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  ledger_done(store, job, 2, 3);
  for (int p = 0; p < 2; ++p) REQUIRE(Table<PsAppliedRecord>(store).put(all_applied(job, p, 2, 3)).ok());
  auto stored = Table<PsAppliedRecord>(store).get(job.hex() + "/1");
  REQUIRE(stored.ok());
  CHECK(stored->shards.size() == 6);
  CHECK(stored->restored_step == -1);
  auto report = account_async_job(store, job, 2, 3, 2);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->examples == 600);
  CHECK(report->reclaimed_shards == 1);
  CHECK(report->resumed_mid_shard == 1);
  CHECK(report->summary().find("trained exactly once") != std::string::npos);
  CHECK(account_async_job(store, job, 0, 3, 2).status().code() == Code::invalid_argument);
}

TEST_CASE("async accounting: doubled, skipped, missing and unfinished data are named", "[gcs][accounting]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  ledger_done(store, job, 1, 3);
  PsAppliedRecord r0 = all_applied(job, 0, 1, 3);
  r0.shards[1] = AppliedCount{1, 1, 140, 40, 0};  // a shard trained again from 0 after a failure
  r0.shards[2] = AppliedCount{1, 2, 90, 0, 10};   // examples skipped
  REQUIRE(Table<PsAppliedRecord>(store).put(r0).ok());
  PsAppliedRecord r1 = all_applied(job, 1, 1, 3);
  r1.shards.pop_back();                           // shard 2 never reached server 1
  REQUIRE(Table<PsAppliedRecord>(store).put(r1).ok());
  // Server 2 wrote nothing.
  auto report = account_async_job(store, job, 1, 3, 3);
  REQUIRE(report.ok());
  CHECK_FALSE(report->exactly_once);
  const std::string s = report->summary();
  INFO(s);
  CHECK(s.find("parameter server 0: shard 1 of epoch 1: 140 of 100 examples applied, 40 of them twice") != std::string::npos);
  CHECK(s.find("parameter server 0: shard 2 of epoch 1: 90 of 100 examples applied, 10 skipped over") != std::string::npos);
  CHECK(s.find("parameter server 1: shard 2 of epoch 1: 0 of 100 examples applied, 100 never") != std::string::npos);
  CHECK(s.find("parameter server 2 recorded no applied data") != std::string::npos);

  // A shard not DONE in the ledger fails the proof even with every example applied.
  ShardRecord open;
  open.job = job;
  open.epoch = 1;
  open.shard = 0;
  open.state = ShardState::assigned;
  open.examples = 100;
  REQUIRE(Table<ShardRecord>(store).put(open).ok());
  REQUIRE(Table<PsAppliedRecord>(store).put(all_applied(job, 0, 1, 3)).ok());
  auto again = account_async_job(store, job, 1, 3, 1);
  REQUIRE(again.ok());
  CHECK_FALSE(again->exactly_once);
  CHECK(again->summary().find("shard 0 of epoch 1 is ASSIGNED, not DONE") != std::string::npos);
}

TEST_CASE("async accounting: a restored server is checked from its checkpointed record, unprovable without one",
          "[gcs][accounting]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  ledger_done(store, job, 1, 2);
  REQUIRE(Table<PsAppliedRecord>(store).put(all_applied(job, 0, 1, 2)).ok());
  PsAppliedRecord restored = all_applied(job, 1, 1, 2);
  restored.attempt = 1;
  restored.restored_step = 400;
  REQUIRE(Table<PsAppliedRecord>(store).put(restored).ok());
  auto report = account_async_job(store, job, 1, 2, 2);
  REQUIRE(report.ok());
  CHECK_FALSE(report->exactly_once);
  CHECK(report->summary().find("parameter server 1 was restored from the checkpoint of version 400, which holds no "
                               "record") != std::string::npos);
  CHECK(report->summary().find("cannot be shown") != std::string::npos);

  // Its checkpoint held the record and the workers replayed what it lost: proven like the others.
  restored.restored_record = true;
  restored.replayed = 7;
  REQUIRE(Table<PsAppliedRecord>(store).put(restored).ok());
  auto stored = Table<PsAppliedRecord>(store).get(job.hex() + "/1");
  REQUIRE(stored.ok());
  CHECK(stored->restored_record);
  CHECK(stored->replayed == 7);
  report = account_async_job(store, job, 1, 2, 2);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->restored_servers == 1);
  CHECK(report->summary().find("1 server(s) restored from a checkpoint, 7 pushes replayed to them") !=
        std::string::npos);
  // A replay that never came: the examples it held are named as missing on that server.
  restored.shards[1].applied = 60;
  REQUIRE(Table<PsAppliedRecord>(store).put(restored).ok());
  report = account_async_job(store, job, 1, 2, 2);
  REQUIRE(report.ok());
  CHECK_FALSE(report->exactly_once);
  CHECK(report->summary().find("parameter server 1: shard 1 of epoch 1: 60 of 100 examples applied, 40 never") !=
        std::string::npos);
}
