// The job supervisor when the GCS came back without its data (actors/job_gcs_loss.cc), over the
// fake placement of job_supervisor_harness.h: a sync job whose checkpoints are mirrored on disk has
// them written back and restarts from them as attempt 1 (one restart of its budget, events naming
// the loss and the step); one without checkpoints, one whose checkpoint directory holds nothing
// usable and an async job fail naming the loss and why; a job still waiting keeps waiting.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "gcs/checkpoint_mirror.h"
#include "gcs/data_accounting.h"
#include "gcs/events.h"
#include "tests/actors/job_supervisor_harness.h"
#include "tests/core/temp_dir.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::actors::testing;

namespace {

constexpr int64_t kPerEpoch = 10;

// A job record with these settings, and its submission: 2 workers (whole gang) or 1 worker and
// 1 server (async), 3 restarts, backoff 0.
SubmitJob record_and_submit(Harness& h, const JobId& id, const std::string& strategy, std::vector<std::string> spec,
                            SubmitJobReply* reply) {
  gcs::JobRecord j;
  j.id = id;
  j.strategy = strategy;
  j.spec = std::move(spec);
  REQUIRE(gcs::Table<gcs::JobRecord>(h.store).put(j).ok());
  SubmitJob s;
  s.job_id = id.hex();
  s.actors = {{"troupe.worker", "w0", 1, 0, {id.hex(), "0"}},
              strategy == "async" ? JobActor{"troupe.ps", "ps0", 1, 0, {id.hex(), "0"}}
                                  : JobActor{"troupe.worker", "w1", 1, 0, {id.hex(), "1"}}};
  s.max_restarts = 3;
  s.restart_backoff_ms = 0;
  s.restart_whole_gang = strategy != "async";
  auto r = h.supervisor.submit(s);
  REQUIRE(r.ok());
  REQUIRE(r->started);
  *reply = *r;
  return s;
}

// Job `id`'s checkpoint of step 25 on disk under <root>/<id>: one shard file and its mirror, with
// the ranges of steps 1-25 and epochs 1 and 2 of a 2-shard ledger DONE.
void mirrored_checkpoint(const std::string& root, const JobId& id) {
  gcs::InMemoryStore then;  // the GCS as the job's rank 0 saw it
  REQUIRE(gcs::record_trained(then, id, 0, 1, 0, 3, 5, kPerEpoch, 25).ok());
  for (int e = 1; e <= 3; ++e) {
    for (int s = 0; s < 2; ++s) {
      gcs::ShardRecord r;
      r.job = id;
      r.epoch = e;
      r.shard = s;
      r.state = e < 3 ? gcs::ShardState::done : gcs::ShardState::assigned;
      r.examples = r.progress = 50;
      REQUIRE(gcs::Table<gcs::ShardRecord>(then).put(r).ok());
    }
  }
  gcs::CheckpointRecord c;
  c.job = id;
  c.step = 25;
  c.dir = root + "/" + id.hex() + "/step-000000000025";
  std::filesystem::create_directories(c.dir);
  std::ofstream(c.dir + "/shard-0-of-1.ckpt", std::ios::binary) << std::string(32, 'p');
  c.shards.push_back({c.dir + "/shard-0-of-1.ckpt", 32, "00000000000000cd"});
  auto m = gcs::gather_mirror(then, c, kPerEpoch, 0);
  REQUIRE(m.ok());
  REQUIRE(gcs::write_checkpoint_mirror(*m).ok());
}

// The GCS came back empty: every record of these tables gone.
void lose_data(gcs::Store& store) {
  for (const char* table : {"jobs", "job_submissions", "checkpoints", "trained_ranges", "shards"}) {
    auto all = store.get_all(table);
    REQUIRE(all.ok());
    for (const auto& [key, value] : *all) REQUIRE(store.remove(table, key).ok());
  }
}

std::vector<std::string> events_of(gcs::Store& store, const std::string& kind, const JobId& job) {
  auto events = gcs::recent_events(store, 200);
  REQUIRE(events.ok());
  std::vector<std::string> out;
  for (const gcs::Event& e : *events)
    if (e.kind == kind && e.subject == job.hex()) out.push_back(e.message);
  return out;
}

}  // namespace

TEST_CASE("gcs loss: a sync job with checkpoints on disk has them written back and restarts from them, the others "
          "fail naming the loss and why", "[jobs][supervisor][gcs_loss]") {
  troupe::testing::TempDir root;
  Harness h;
  const JobId resumable = JobId::random(), plain = JobId::random(), empty = JobId::random(), async = JobId::random();
  const std::vector<std::string> ckpt = {"checkpoint_every=5", "checkpoint_dir=" + root.path()};
  SubmitJobReply r_resumable, r_plain, r_empty, r_async;
  record_and_submit(h, resumable, "sync", ckpt, &r_resumable);
  record_and_submit(h, plain, "sync", {"epochs=3"}, &r_plain);
  record_and_submit(h, empty, "sync", ckpt, &r_empty);  // its directory holds nothing
  record_and_submit(h, async, "async", ckpt, &r_async);
  mirrored_checkpoint(root.path(), resumable);
  mirrored_checkpoint(root.path(), async);

  lose_data(h.store);
  h.supervisor.on_gcs_lost("the GCS came back without the head's stamp");

  // The resumable job: RUNNING, its checkpoint, ranges and finished epochs back in the GCS.
  gcs::JobRecord j = h.job(resumable);
  CHECK(j.state == gcs::JobState::running);
  auto manifest = gcs::Table<gcs::CheckpointRecord>(h.store).get(resumable.hex() + "/25");
  REQUIRE(manifest.ok());
  CHECK(manifest->shards.size() == 1u);
  auto ranges = gcs::trained_ranges(h.store, resumable);
  REQUIRE(ranges.ok());
  CHECK(ranges->size() == 3u);  // epochs 1, 2 and steps 0-4 of epoch 3
  auto epoch2 = gcs::Table<gcs::ShardRecord>(h.store).get(resumable.hex() + "/2/1");
  REQUIRE(epoch2.ok());
  CHECK(epoch2->state == gcs::ShardState::done);
  CHECK_FALSE(gcs::Table<gcs::ShardRecord>(h.store).get(resumable.hex() + "/3/0").ok());  // trained again
  const auto restored = events_of(h.store, "checkpoints_restored", resumable);
  REQUIRE(restored.size() == 1u);
  CHECK(restored[0].find("newest: step 25") != std::string::npos);
  const auto restarting = events_of(h.store, "job_restarting", resumable);
  REQUIRE(restarting.size() == 1u);
  CHECK(restarting[0].find("the GCS lost its data while the job ran") != std::string::npos);
  CHECK(restarting[0].find("its checkpoint of step 25") != std::string::npos);
  CHECK(restarting[0].find("(restart 1 of 3)") != std::string::npos);
  CHECK(was_stopped(h, r_resumable, 0));
  CHECK(was_stopped(h, r_resumable, 1));
  // Its old actors exit; the gang is placed again as attempt 1.
  for (size_t i = 0; i < 2; ++i)
    h.supervisor.on_down(h.addr(r_resumable, i), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
  h.supervisor.retry_pending();
  REQUIRE(h.last_asks.size() == 2u);
  CHECK(h.last_asks[0].actor.args[2] == "1");  // the attempt
  CHECK(h.job(resumable).state == gcs::JobState::running);
  CHECK(events_of(h.store, "job_restarted", resumable).size() == 1u);

  // The others: FAILED, naming the loss and why each cannot resume, their actors stopped.
  const std::pair<JobId, std::string> failed[] = {
      {plain, "it wrote no checkpoints to resume from"},
      {empty, "no usable checkpoint manifest under " + root.path() + "/" + empty.hex()},
      {async, "an async job does not resume from its checkpoints after a GCS loss"}};
  for (const auto& [id, why] : failed) {
    gcs::JobRecord f = h.job(id);
    INFO(f.message);
    CHECK(f.state == gcs::JobState::failed);
    CHECK(f.message.find("the GCS lost its data while the job ran") != std::string::npos);
    CHECK(f.message.find(why) != std::string::npos);
  }
  CHECK(was_stopped(h, r_plain, 0));
  CHECK(was_stopped(h, r_async, 1));
  CHECK(gcs::Table<gcs::CheckpointRecord>(h.store).list()->size() == 1u);  // the async job's not written back
}

TEST_CASE("gcs loss: a job waiting for its first placement keeps waiting", "[jobs][supervisor][gcs_loss]") {
  Harness h;
  h.fits = false;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(h.request(id));
  REQUIRE(reply.ok());
  REQUIRE_FALSE(reply->started);
  lose_data(h.store);
  h.supervisor.on_gcs_lost("the GCS came back without the head's stamp");
  CHECK(h.job(id).state == gcs::JobState::pending);
  h.fits = true;
  CHECK_FALSE(h.supervisor.retry_pending());
  CHECK(h.job(id).state == gcs::JobState::running);
}
