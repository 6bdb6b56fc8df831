// Live recovery's parts (trainers/job/live_recovery.h) over an in-process group and an in-memory
// GCS: who sends the held state and what every rank ends with, the survivors' wait for their
// replacements, rank 0's rewind and records, and which jobs recover live. The whole path on a real
// cluster is tests/jobs/live_recovery_cluster_test.cc.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "collectives/group_rendezvous.h"
#include "collectives/inproc_transport.h"
#include "data/shards/shard_ledger.h"
#include "gcs/data_accounting.h"
#include "gcs/events.h"
#include "gcs/group_generations.h"
#include "gcs/in_memory_store.h"
#include "gcs/job_recovery.h"
#include "trainers/job/live_recovery.h"

using namespace troupe;
using namespace troupe::job;

namespace {

// A state after `step` steps, its numbers derived from the step (so two steps' states differ).
HeldState held_at(int64_t step, size_t n = 1000) {
  HeldState h;
  h.held = true;
  h.state.step = step;
  h.state.epoch = 3;
  h.state.epoch_step = 17;
  h.state.params.resize(n);
  for (size_t i = 0; i < n; ++i) h.state.params[i] = static_cast<float>(step) * 0.001f + static_cast<float>(i) * 1e-7f;
  h.state.optimizer.name = "adamw";
  h.state.optimizer.steps = step;
  h.state.optimizer.vectors = {std::vector<float>(n, 0.25f), std::vector<float>(n, -static_cast<float>(step))};
  return h;
}

// Runs share_held_state on `held.size()` ranks (a null entry: the rank holds nothing).
std::vector<Expected<LiveStart>> share(const std::vector<const HeldState*>& held) {
  const int n = static_cast<int>(held.size());
  auto transports = collectives::make_inproc_group(n);
  std::vector<Expected<LiveStart>> out(n, Expected<LiveStart>(internal_error("not run")));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      out[r] = share_held_state(comm, held[r], std::chrono::seconds(10));
    });
  for (auto& t : threads) t.join();
  return out;
}

void same_state(const checkpoint::TrainingState& a, const checkpoint::TrainingState& b) {
  CHECK(a.step == b.step);
  CHECK(a.epoch == b.epoch);
  CHECK(a.epoch_step == b.epoch_step);
  CHECK(a.params == b.params);
  CHECK(a.optimizer.name == b.optimizer.name);
  CHECK(a.optimizer.steps == b.optimizer.steps);
  CHECK(a.optimizer.vectors == b.optimizer.vectors);
}

}  // namespace

TEST_CASE("live recovery: nobody holding a state leaves the group to the checkpoint path") {
  auto out = share({nullptr, nullptr, nullptr});
  for (auto& o : out) {
    REQUIRE(o.ok());
    CHECK_FALSE(o->live);
    CHECK(o->source == -1);
  }
}

TEST_CASE("live recovery: a survivor's state reaches the replacements, whole and exact") {
  const HeldState kept = held_at(37);
  auto out = share({nullptr, &kept, nullptr, &kept});  // ranks 0 and 2 replaced
  for (size_t r = 0; r < out.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(out[r].ok());
    CHECK(out[r]->live);
    CHECK(out[r]->source == 1);  // the lowest rank holding the newest step
    CHECK(out[r]->receivers == 2);
    CHECK(out[r]->bytes == static_cast<int64_t>(3 * 1000 * sizeof(float)));
    same_state(out[r]->state, kept.state);
  }
}

TEST_CASE("live recovery: a survivor whose all-reduce completed before the peer died is a step ahead: its state wins") {
  // Rank 2's step 41 completed (the dead rank's part had arrived); ranks 0 and 3 failed in it.
  const HeldState behind = held_at(40), ahead = held_at(41), far = held_at(int64_t{1} << 33, 10);
  auto out = share({&behind, nullptr, &ahead, &behind});
  for (auto& o : out) {
    REQUIRE(o.ok());
    CHECK(o->source == 2);
    CHECK(o->receivers == 3);
    same_state(o->state, ahead.state);
  }
  auto big = share({nullptr, &far});  // steps past 2^24 travel exactly
  REQUIRE(big[0].ok());
  CHECK(big[0]->state.step == (int64_t{1} << 33));
  CHECK(big[0]->state.optimizer.steps == (int64_t{1} << 33));
}

TEST_CASE("live recovery: survivors wait for the replacements' generation, until stopped or their deadline") {
  gcs::InMemoryStore store;
  std::atomic<bool> cancel{false};
  std::thread joins([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    REQUIRE(store.put(collectives::kGroupMembersTable, collectives::group_member_key("job-x", 3, 1), "a b c").ok());
    REQUIRE(gcs::announce_generation(store, "job-x", 3).ok());  // as form_group registers
  });
  auto g = await_replacements(store, "job-x", 2, std::chrono::seconds(10), cancel);
  joins.join();
  REQUIRE(g.ok());
  CHECK(*g == 3);
  auto none = await_replacements(store, "job-x", 3, std::chrono::milliseconds(300), cancel);
  CHECK(none.status().code() == Code::timeout);
  CHECK(none.status().message().find("no replacement joined group 'job-x' after generation 3 failed") !=
        std::string::npos);
  cancel = true;
  CHECK(await_replacements(store, "job-x", 3, std::chrono::seconds(10), cancel).status().code() == Code::unavailable);
}

TEST_CASE("live recovery: rank 0 puts the ledger at the held step, keeps the steps before it, and says so") {
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  const int shards = 2;
  const int64_t per_epoch = 10;
  data::ShardLedger ledger(store, job, data::ShardLedgerOptions{shards});
  REQUIRE(ledger.create_epoch(1, {50, 50}).ok());
  REQUIRE(ledger.create_epoch(2, {50, 50}).ok());
  // Epoch 1 done by the failed generation; epoch 2 claimed by it; a checkpoint's range up to step 10.
  REQUIRE(gcs::record_trained(store, job, 0, 1, 0, 1, 10, per_epoch, 10).ok());
  REQUIRE(gcs::note_restart(store, job, 1, "worker-1 failed", 1000, 1100, 14).ok());
  LiveStart live;
  live.live = true;
  live.source = 0;
  live.receivers = 1;
  live.bytes = 4000;
  live.state.step = 13;  // epoch 2, 3 of its steps done
  REQUIRE(rewind_live(store, job, shards, per_epoch, 1, live).ok());
  auto ranges = gcs::trained_ranges(store, job);
  REQUIRE(ranges.ok());
  REQUIRE(ranges->size() == 2);
  CHECK(ranges->back().epoch == 2);
  CHECK(ranges->back().first_step == 0);
  CHECK(ranges->back().end_step == 3);
  auto rec = gcs::job_recovery(store, job);
  REQUIRE(rec.ok());
  REQUIRE(rec->has_value());
  CHECK((*rec)->mode == "live");
  CHECK((*rec)->from_step == 13);
  CHECK((*rec)->source_rank == 0);
  CHECK((*rec)->bytes_moved == 4000);
  CHECK((*rec)->steps_lost() == 1);  // the supervisor saw step 14 done by some rank (a step ahead)
  auto events = gcs::recent_events(store, 10);
  REQUIRE(events.ok());
  bool said = false;
  for (const gcs::Event& e : *events)
    said |= e.kind == "job_recovered_live" &&
            e.message.find("from the memory of rank 0 (step 13): 4000 bytes of state sent to 1 rank(s)") !=
                std::string::npos;
  CHECK(said);
}

TEST_CASE("live recovery: which jobs recover live, and --recovery's refusals") {
  JobSpec s;
  s.strategy = "sync";
  s.workers = 2;
  CHECK(recovers_live(s));
  s.recovery = "checkpoint";
  CHECK_FALSE(recovers_live(s));
  s.recovery = "live";
  CHECK(validate(s).ok());
  s.shard = "optimizer";  // sharded: the buddy mirrors
  CHECK(recovers_live(s));
  CHECK(validate(s).ok());
  s.mirror_every = 0;
  CHECK(validate(s).message().find("--mirror-every 0 is not a number of steps >= 1") != std::string::npos);
  s.mirror_every = 10;
  s.mirror_overlap = "sometimes";
  CHECK(validate(s).message().find("--mirror-overlap 'sometimes' is not one of auto, on, off") != std::string::npos);
  s.mirror_overlap = "on";
  CHECK(mirror_overlaps(s));
  s.mirror_overlap = "off";
  CHECK_FALSE(mirror_overlaps(s));
  s.shard = "none";
  s.gpus_per_worker = 1;
  CHECK_FALSE(recovers_live(s));
  Status st = validate(s);
  INFO(st.to_string());
  CHECK(st.code() == Code::invalid_argument);
  CHECK(st.message().find("--recovery live is built for CPU sync and pipeline jobs only so far, not GPU workers") !=
        std::string::npos);
  s.gpus_per_worker = 0;
  s.recovery = "sometimes";
  CHECK(validate(s).message().find("--recovery 'sometimes' is not one of auto, live, checkpoint") != std::string::npos);
  s.recovery = "auto";
  s.elastic = true;  // elastic: the survivors go on smaller from their memory
  CHECK(recovers_live(s));
  s.shard = "optimizer";  // and sharded: the shares re-cut for the new size from the mirrors
  CHECK(recovers_live(s));
  s.recovery = "live";
  CHECK(validate(s).ok());
  s.recovery = "auto";
  s.shard = "none";
  s.elastic = false;
  s.strategy = "pipeline";  // 2 replicas of 2 stages: a lost stage from the other replica
  s.stages = 2;
  s.workers = 4;
  CHECK(recovers_live(s));
  s.workers = 2;  // one replica: the buddy stage's mirror
  CHECK(recovers_live(s));
  s.workers = 1;
  s.stages = 1;
  CHECK_FALSE(recovers_live(s));
  s.recovery = "live";
  CHECK(validate(s).message().find("not a pipeline of one worker") != std::string::npos);
}

TEST_CASE("live recovery: a survivor blocked in a collective with a lost peer leaves it once the replacement's "
          "generation is registered") {
  gcs::InMemoryStore store;
  auto transports = collectives::make_inproc_group(2);
  collectives::Communicator comm(std::move(transports[0]));  // rank 1 never calls: it is gone
  GenerationWatch watch(store, "job-y", 4, &comm.transport(), std::chrono::milliseconds(20));
  std::thread replaced([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(store.put(collectives::kGroupMembersTable, collectives::group_member_key("job-y", 5, 1), "a b c").ok());
    REQUIRE(gcs::announce_generation(store, "job-y", 5).ok());  // as form_group registers
  });
  std::vector<float> grads(64, 1.0f);
  collectives::CollectiveOptions co;
  co.timeout = std::chrono::seconds(30);
  const auto start = std::chrono::steady_clock::now();
  Status st = comm.allreduce(grads.data(), grads.data(), grads.size(), DType::f32, collectives::ReduceOp::avg, co);
  replaced.join();
  INFO(st.to_string());
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("group 'job-y' generation 4 was replaced by generation 5") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // not the 30 s deadline
}

TEST_CASE("live recovery: a restart's failed step is the most the failed attempt's workers did, said before or after "
          "the supervisor began the restart") {
  gcs::InMemoryStore store;
  const JobId job = JobId::random();
  // A survivor saw its peer gone before the supervisor did: its step waits for the restart.
  REQUIRE(gcs::note_failed_step(store, job, 1042).ok());
  REQUIRE(gcs::note_restart(store, job, 1, "worker-3 failed", 1000, 1050, 1010).ok());  // the record lags
  REQUIRE(gcs::note_failed_step(store, job, 1041).ok());  // a worker a step behind: no change
  auto rec = gcs::job_recovery(store, job);
  REQUIRE(rec.ok());
  REQUIRE(rec->has_value());
  CHECK((*rec)->restarts == 1);
  CHECK((*rec)->failed_step == 1042);
  REQUIRE(gcs::note_resumed_at(store, job, 1, 2000, 1000).ok());  // from the checkpoint of step 1000
  rec = gcs::job_recovery(store, job);
  CHECK((*rec)->mode == "checkpoint");
  CHECK((*rec)->steps_lost() == 42);
  // The next failure: a stopped worker says its step after the supervisor began the restart.
  REQUIRE(gcs::note_restart(store, job, 2, "worker-1 failed", 3000, 3010, 1300).ok());
  REQUIRE(gcs::note_failed_step(store, job, 1333).ok());
  rec = gcs::job_recovery(store, job);
  CHECK((*rec)->restarts == 2);
  CHECK((*rec)->failed_step == 1333);
}
