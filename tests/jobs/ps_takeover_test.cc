// A replacement async worker taking over from a predecessor that died in the middle of a push
// (trainers/job/ps_takeover.h), in process: two parameter shards, the shard ledger in an in-memory
// store, the real MLP on Fashion-MNIST. The predecessor's last push reached shard 0 only; the
// replacement pushes it again to shard 1, resumes the shards at the servers' applied offsets, and
// the accounting (gcs/async_accounting.h) proves every example applied once on both shards. Done
// the old way (released to start again at 0, no catch-up), the proof fails and names the doubles.
// And the other fault: a parameter server over TCP dies and comes back restored from its newest
// checkpoint, the worker replays what it lost (trainers/ps/ps_client.h), and the proof passes on
// both servers; without the pushes kept for replays it fails, naming what the restored one lacks.
#include <catch2/catch.hpp>

#include <functional>
#include <mutex>

#include "gcs/async_accounting.h"
#include "tests/jobs/ps_scenario.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/job/ps_applied.h"
#include "trainers/job/ps_takeover.h"
#include "trainers/ps/async_worker.h"
#include "trainers/ps/ps_server.h"
#include "trainers/ps/ps_job.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;

namespace {

constexpr int kLedgerShards = troupe::testing::kPsLedgerShards;
using Scenario = troupe::testing::PsScenario;

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

// The replacement (`client`, ledger identity `me`) trains the rest of the epoch; every shard then
// publishes its applied data (at the attempt `attempt_of` gives it) and the job is accounted.
// `start_clock`: the takeover's (every server restored), as the job's worker takes it.
Expected<gcs::AsyncAccountingReport> finish_and_account(Scenario& s, WorkerId me, ps::PsClient& client,
                                                        const std::function<int(int)>& attempt_of,
                                                        int64_t start_clock = 0) {
  job::LedgerFeed feed(s.train, s.store, s.job, me, s.fo);
  ps::PsWorker w{&client, 0, 1};
  w.evaluate = false;
  w.start_clock = std::max(client.start_clock(), start_clock);
  auto result = ps::train_ps_worker(s.o, s.train, s.test, feed, w);
  INFO(result.status().to_string());
  REQUIRE(result.ok());
  for (int i = 0; i < 2; ++i) REQUIRE(job::publish_applied(s.store, s.job, i, attempt_of(i), *s.shards[i]).ok());
  REQUIRE(job::wait_for_applied(s.store, s.job, 2, std::chrono::milliseconds(100)).ok());
  return gcs::account_async_job(s.store, s.job, 1, kLedgerShards, 2);
}

// The replacement trains the rest of the epoch and finishes; every shard records its applied data.
// The takeover either pushes the predecessor's last push again to shard 1 (it died between the
// servers), or, with `replays` > 0, replays that many of its pushes to shard 1 (restored from a
// checkpoint: attempt 1).
Expected<gcs::AsyncAccountingReport> replace_and_finish(Scenario& s, WorkerId me, bool take_over, int replays = 0) {
  auto client = ps::local_ps_client(s.raw(), 0);
  data::ShardLedger ledger(s.store, s.job, data::ShardLedgerOptions{kLedgerShards});
  if (take_over) {
    auto t = job::take_over(*client, s.o, s.train, s.fo.plan, ledger, me, 0, 1);
    REQUIRE(t.ok());
    INFO(t->summary);
    CHECK(t->caught_up == (replays > 0 ? 0 : 1));
    CHECK(t->replayed == replays);
    CHECK(t->resumed_mid_shard >= 1);
    if (replays > 0) CHECK(t->summary.find(std::to_string(replays) + " of its pushes replayed to 1 server(s)") != std::string::npos);
  } else {
    REQUIRE(ledger.release_worker(me).ok());  // the old way: from example 0, the last push half-done
  }
  return finish_and_account(s, me, *client, [&](int i) { return i == 1 && replays > 0 ? 1 : 0; });
}

// One node held the worker and parameter server 1, and both die together: the worker after 9 whole
// pushes and a 10th that reached server 0 only; server 1 comes back restored from the checkpoint of
// version 8, without the pushes of clocks 8 and 9, which only the dead worker could have replayed.
// With `history`, the servers keep their push history (they checkpoint), so the replacement can
// ask server 0 for them.
void worker_and_server_die(Scenario& s, troupe::testing::PsCheckpointFiles& files, WorkerId me) {
  for (int i = 0; i < 2; ++i) REQUIRE(s.shards[i]->enable_checkpoints(files.every(4, i, s.job.hex())).ok());
  predecessor(s, me, 9);
  REQUIRE(s.shards[0]->version() == 10);
  REQUIRE(s.shards[1]->version() == 9);
  auto restored = s.make_shard(1);
  REQUIRE(restored->restore(files.load(8, s.job.hex())).ok());
  REQUIRE(restored->restored_record());
  REQUIRE(restored->enable_checkpoints(files.every(4, 1, s.job.hex())).ok());
  REQUIRE(restored->rejoin_worker(0).ok());  // the replacement's hello
  s.shards[1] = std::move(restored);
}

// The worker alone over TCP, its two servers checkpointing every 4 versions; after its 10th step
// server 1 is stopped and a replacement restored from the checkpoint of version 8 takes its place
// (pushes of clocks 8 and 9 lost). The worker keeps its pushes for replays when `keep` is set.
Expected<gcs::AsyncAccountingReport> restore_a_server(Scenario& s, bool keep, int64_t* replayed) {
  troupe::testing::PsCheckpointFiles files;
  std::mutex mu;  // the addresses
  const ps::PsServerOptions so{s.job.hex()};
  std::vector<std::unique_ptr<ps::PsServer>> servers;
  std::vector<std::string> addresses;
  for (int i = 0; i < 2; ++i) {
    REQUIRE(s.shards[i]->enable_checkpoints(files.every(4, i, s.job.hex())).ok());
    auto server = ps::PsServer::start(std::move(s.shards[i]), so);
    REQUIRE(server.ok());
    addresses.push_back((*server)->address());
    servers.push_back(std::move(*server));
  }
  ps::PsClientOptions co;
  co.job = s.job.hex();
  co.timeout = std::chrono::seconds(10);
  co.reconnect_timeout = std::chrono::seconds(10);
  co.resolve = [&](int i) -> Expected<std::string> {
    std::lock_guard<std::mutex> lock(mu);
    return addresses.at(static_cast<size_t>(i));
  };
  co.checkpoint_versions = keep ? 4 : 0;
  auto client = ps::connect_ps(addresses, co);
  REQUIRE(client.ok());

  std::unique_ptr<ps::PsServer> dead;
  auto restore = [&] {
    dead = std::move(servers[1]);
    dead->stop();
    auto shard = s.make_shard(1);
    REQUIRE(shard->restore(files.load(8, s.job.hex())).ok());
    CHECK(shard->restored_record());
    REQUIRE(shard->enable_checkpoints(files.every(4, 1, s.job.hex())).ok());
    auto server = ps::PsServer::start(std::move(shard), so);
    REQUIRE(server.ok());
    std::lock_guard<std::mutex> lock(mu);
    addresses[1] = (*server)->address();
    servers[1] = std::move(*server);
  };
  job::LedgerFeed feed(s.train, s.store, s.job, WorkerId::random(), s.fo);
  ps::PsWorker w{client->get(), 0, 1};
  w.evaluate = false;
  bool restored = false;
  auto progress = [&](const TrainProgress& p) {
    if (p.step == 10 && !restored) {
      restore();
      restored = true;
    }
  };
  auto result = ps::train_ps_worker(s.o, s.train, s.test, feed, w, progress);
  INFO(result.status().to_string());
  REQUIRE(result.ok());
  REQUIRE(restored);
  *replayed = (*client)->replayed();
  CHECK(servers[1]->shard().replayed() == *replayed);
  CHECK(servers[1]->shard().restored_step() == 8);
  if (keep) CHECK(servers[0]->shard().version() == servers[1]->shard().version());  // every push on both
  for (int i = 0; i < 2; ++i) REQUIRE(job::publish_applied(s.store, s.job, i, i, servers[i]->shard()).ok());
  return gcs::account_async_job(s.store, s.job, 1, kLedgerShards, 2);
}

}  // namespace

TEST_CASE("ps replay: a server restored from its checkpoint gets the pushes it lost replayed, applied once",
          "[jobs][ps][accounting][tcp]") {
  Scenario s;
  int64_t replayed = 0;
  auto report = restore_a_server(s, true, &replayed);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->examples == 1300);
  CHECK(replayed == 2);  // clocks 8 and 9
  CHECK(report->restored_servers == 1);
  CHECK(report->replayed == 2);
  CHECK(report->summary().find("1 server(s) restored from a checkpoint, 2 pushes replayed") != std::string::npos);
}

TEST_CASE("ps replay: without the pushes kept, the accounting names what the restored server lacks",
          "[jobs][ps][accounting][tcp]") {
  Scenario s;
  int64_t replayed = 0;
  auto report = restore_a_server(s, false, &replayed);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(replayed == 0);
  CHECK_FALSE(report->exactly_once);
  CHECK(report->summary().find("parameter server 1: shard") != std::string::npos);
  CHECK(report->summary().find("parameter server 0") == std::string::npos);  // the other one has it all
}

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

TEST_CASE("ps takeover: a worker and a server that die together (one node) lose nothing: the replacement replays "
          "its predecessor's pushes to the restored server", "[jobs][ps][accounting]") {
  Scenario s;
  troupe::testing::PsCheckpointFiles files;
  const WorkerId me = WorkerId::random();
  worker_and_server_die(s, files, me);
  auto report = replace_and_finish(s, me, true, 2);  // clocks 8 and 9
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->examples == 1300);
  CHECK(s.shards[1]->replayed() == 2);
  CHECK(s.shards[0]->version() == s.shards[1]->version());  // every push applied on both
}

TEST_CASE("ps takeover: a worker and every server lost together: the shard it completed after the checkpoint is "
          "trained again from where the servers' records end", "[jobs][ps][accounting]") {
  // One node held the worker and both servers (or a cut link took them together). The servers
  // come back from the checkpoint of version 4 (pushes 0-3: shard 0's first 256 examples); the
  // worker had gone on to finish shard 0 (325 examples) and start shard 1. No one can replay the
  // lost pushes: shard 0 must be reopened at 256, shard 1 released at 0, nothing applied twice.
  Scenario s;
  troupe::testing::PsCheckpointFiles files;
  const WorkerId me = WorkerId::random();
  for (int i = 0; i < 2; ++i) REQUIRE(s.shards[i]->enable_checkpoints(files.every(4, i, s.job.hex())).ok());
  predecessor(s, me, 7);
  data::ShardLedger ledger(s.store, s.job, data::ShardLedgerOptions{kLedgerShards});
  auto before = ledger.epoch_status(1);
  REQUIRE(before.ok());
  REQUIRE((*before)[0].state == gcs::ShardState::done);  // completed after the checkpoint of version 4
  for (int i = 0; i < 2; ++i) {
    auto restored = s.make_shard(i);
    REQUIRE(restored->restore(files.load(4, s.job.hex())).ok());
    REQUIRE(restored->rejoin_worker(0).ok());  // the replacement's hello
    s.shards[i] = std::move(restored);
  }
  auto client = ps::local_ps_client(s.raw(), 0);
  auto t = job::take_over(*client, s.o, s.train, s.fo.plan, ledger, me, 0, 1);
  REQUIRE(t.ok());
  INFO(t->summary);
  CHECK(t->reopened == 1);
  CHECK(t->start_clock == 4);  // after the records' last push (clock 3), not at 0
  CHECK(t->summary.find("epoch 1 shard 0 at 256/325") != std::string::npos);
  auto after = ledger.epoch_status(1);
  REQUIRE(after.ok());
  CHECK((*after)[0].state == gcs::ShardState::unassigned);
  CHECK((*after)[0].resume_at == 256);
  auto report = finish_and_account(s, me, *client, [](int) { return 1; }, t->start_clock);  // both restored
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->examples == 1300);
  for (int i = 0; i < 2; ++i) CHECK(s.shards[i]->position(0).last_clock > 4);  // the clocks went on from there
}

TEST_CASE("ps takeover: every server restored with the rank one push apart: the server behind gets that push, the "
          "rest is trained again", "[jobs][ps][accounting]") {
  // Checkpoints of one version catch a rank one push apart on different servers when several
  // workers push at once (each server applies their pushes in its own order). Here: server 0 comes
  // back from version 5 (clocks 0-4), server 1 from version 4 (clocks 0-3). The replacement must
  // give server 1 the push of clock 4 (the batch server 0's record names) and go on at clock 5;
  // the old takeover stopped the job: "the parameter servers disagree on its predecessor's last push".
  Scenario s;
  troupe::testing::PsCheckpointFiles files;
  const WorkerId me = WorkerId::random();
  for (int i = 0; i < 2; ++i) REQUIRE(s.shards[i]->enable_checkpoints(files.every(1, i, s.job.hex())).ok());
  predecessor(s, me, 7);
  data::ShardLedger ledger(s.store, s.job, data::ShardLedgerOptions{kLedgerShards});
  const int64_t from[2] = {5, 4};
  for (int i = 0; i < 2; ++i) {
    auto restored = s.make_shard(i);
    REQUIRE(restored->restore(files.load(from[i], s.job.hex())).ok());
    REQUIRE(restored->rejoin_worker(0).ok());  // the replacement's hello
    s.shards[i] = std::move(restored);
  }
  auto client = ps::local_ps_client(s.raw(), 0);
  auto t = job::take_over(*client, s.o, s.train, s.fo.plan, ledger, me, 0, 1);
  INFO(t.status().to_string());
  REQUIRE(t.ok());
  INFO(t->summary);
  CHECK(t->caught_up == 1);
  CHECK(t->start_clock == 5);
  CHECK(s.shards[1]->replayed() == 1);
  CHECK(s.shards[0]->version() == s.shards[1]->version());
  CHECK(s.shards[0]->position(0).last == s.shards[1]->position(0).last);
  CHECK(t->reopened == 1);  // shard 0, completed after clock 4's batch (examples 256-319)
  CHECK(t->summary.find("epoch 1 shard 0 at 320/325") != std::string::npos);
  auto report = finish_and_account(s, me, *client, [](int) { return 1; }, t->start_clock);
  REQUIRE(report.ok());
  INFO(report->summary());
  CHECK(report->exactly_once);
  CHECK(report->examples == 1300);
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

TEST_CASE("ps takeover: a predecessor that held no shard leaves none to move, and the summary says so",
          "[jobs][ps][accounting]") {
  // Killed before its first claim (as between two shards): nothing in the ledger is its.
  Scenario s;
  const WorkerId me = WorkerId::random();
  for (auto* shard : s.raw()) {
    shard->remove_worker(0, "its node was killed");
    REQUIRE(shard->rejoin_worker(0).ok());
  }
  auto client = ps::local_ps_client(s.raw(), 0);
  data::ShardLedger ledger(s.store, s.job, data::ShardLedgerOptions{kLedgerShards});
  auto t = job::take_over(*client, s.o, s.train, s.fo.plan, ledger, me, 0, 1);
  REQUIRE(t.ok());
  INFO(t->summary);
  CHECK(t->released == 0);
  CHECK(t->caught_up == 0);
  CHECK(t->summary.find("held no shards (it died between two)") != std::string::npos);
}
