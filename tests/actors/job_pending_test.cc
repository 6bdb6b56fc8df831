// The job supervisor's actors waiting for room (actors/job_pending.cc) over the fake placement of
// job_supervisor_harness.h, which records each ask as the head does (PENDING with the reason, or
// ALIVE): a replacement that waits is one PENDING record however many retries; what is never
// placed — a job stopped or failed while its actors wait, a gang resized or asked again — ends
// DEAD "never placed", so the store holds no PENDING record of a job that ended; a job forgotten
// leaves none of its groups' member keys, plans or generations.
#include <catch2/catch.hpp>

#include "gcs/group_generations.h"
#include "gcs/group_plan.h"
#include "gcs/job_table.h"
#include "tests/actors/job_supervisor_harness.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::actors::testing;

namespace {

// The harness's job with `max_restarts` (backoff 0), restarted whole or actor by actor.
SubmitJob supervised(Harness& h, const JobId& id, int max_restarts, bool whole_gang) {
  SubmitJob s = h.request(id);
  s.max_restarts = max_restarts;
  s.restart_backoff_ms = 0;
  s.restart_whole_gang = whole_gang;
  return s;
}

// The harness's async job (2 workers, 1 server) that replaces failed actors, servers restored.
SubmitJobReply submit_async(Harness& h, const JobId& id) {
  SubmitJob s = supervised(h, id, 3, false);
  s.restore_servers = true;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  return *reply;
}

// Every record of job `id` that is DEAD says it was never placed.
void dead_ones_never_placed(Harness& h, const JobId& id) {
  auto all = gcs::Table<gcs::ActorRecord>(h.store).list();
  REQUIRE(all.ok());
  for (const gcs::ActorRecord& r : *all) {
    if (r.job != id || r.state != gcs::ActorState::dead) continue;
    INFO(r.death_reason);
    CHECK(r.death_reason.rfind("never placed: ", 0) == 0);
  }
}

}  // namespace

TEST_CASE("pending actors: replacements waiting for room are one PENDING record each, however many retries",
          "[jobs][supervisor][pending]") {
  Harness h;
  const JobId id = h.record_job();
  submit_async(h, id);
  REQUIRE(h.records_in(id, gcs::ActorState::alive) == 3u);
  h.fits = false;  // a full cluster
  h.supervisor.on_node_dead(h.node, "its connection dropped");  // all three lost at once
  for (int retry = 0; retry < 50; ++retry) {
    CHECK(h.supervisor.retry_pending());
    REQUIRE(h.records_in(id, gcs::ActorState::pending) == 3u);
  }
  CHECK(h.all_asks.size() > 50u);  // retried every time, always under the same three ids
  CHECK(h.job(id).message.find("waiting for resources: " + h.reason) != std::string::npos);
  h.fits = true;  // room again
  CHECK_FALSE(h.supervisor.retry_pending());
  CHECK(h.records_in(id, gcs::ActorState::pending) == 0u);
  CHECK(h.records_in(id, gcs::ActorState::alive) == 6u);  // the lost ones' records stay as the fake wrote them
  for (const std::string& actor : h.job(id).actors) {
    auto rec = gcs::Table<gcs::ActorRecord>(h.store).get(actor);
    REQUIRE(rec.ok());
    CHECK(rec->state == gcs::ActorState::alive);
  }
}

TEST_CASE("pending actors: a job stopped or failed while its replacements wait leaves no PENDING record",
          "[jobs][supervisor][pending]") {
  Harness h;
  const JobId stopped = h.record_job();
  auto reply = submit_async(h, stopped);
  h.fits = false;
  h.supervisor.on_down(h.addr(reply, 0), to_error(internal_error("killed")), "killed");
  for (int retry = 0; retry < 5; ++retry) h.supervisor.retry_pending();
  REQUIRE(h.records_in(stopped, gcs::ActorState::pending) == 1u);
  REQUIRE(h.supervisor.stop({stopped.hex(), "not needed"}).ok());
  // The survivors were asked to stop: once they are down the job is forgotten, and nothing waits.
  h.supervisor.on_down(h.addr(reply, 1), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
  h.supervisor.on_down(h.addr(reply, 2), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
  CHECK_FALSE(h.supervisor.supervises(stopped));
  CHECK(h.records_in(stopped, gcs::ActorState::pending) == 0u);
  CHECK(h.records_in(stopped, gcs::ActorState::dead) == 1u);
  dead_ones_never_placed(h, stopped);

  // A budget spent while a replacement waits: the job fails, and its waiting actor ends with it.
  const JobId failed = h.record_job();
  h.fits = true;
  SubmitJob s = supervised(h, failed, 1, false);
  auto second = h.supervisor.submit(s);
  REQUIRE(second.ok());
  h.fits = false;
  h.supervisor.on_down(h.addr(*second, 0), to_error(internal_error("killed")), "killed");
  h.supervisor.retry_pending();
  REQUIRE(h.records_in(failed, gcs::ActorState::pending) == 1u);
  h.supervisor.on_down(h.addr(*second, 1), to_error(internal_error("killed")), "killed");  // joins the restart
  h.supervisor.retry_pending();
  REQUIRE(h.records_in(failed, gcs::ActorState::pending) == 2u);
  h.supervisor.on_down(h.addr(*second, 2), to_error(internal_error("killed")), "killed");
  h.supervisor.retry_pending();
  // ps0 without restore_servers fails the job; nothing of it is left running or waiting.
  CHECK(h.job(failed).state == gcs::JobState::failed);
  CHECK_FALSE(h.supervisor.supervises(failed));
  CHECK(h.records_in(failed, gcs::ActorState::pending) == 0u);
  dead_ones_never_placed(h, failed);
}

TEST_CASE("pending actors: a job cancelled before it was ever placed leaves no PENDING record",
          "[jobs][supervisor][pending]") {
  Harness h;
  h.fits = false;
  const JobId id = h.record_job();
  REQUIRE(h.supervisor.submit(h.request(id)).ok());
  for (int retry = 0; retry < 10; ++retry) CHECK(h.supervisor.retry_pending());
  CHECK(h.records_in(id, gcs::ActorState::pending) == 3u);  // one per actor of the gang
  REQUIRE(h.supervisor.stop({id.hex(), "not needed"}).ok());
  CHECK(h.records_in(id, gcs::ActorState::pending) == 0u);
  CHECK(h.records_in(id, gcs::ActorState::dead) == 3u);
  dead_ones_never_placed(h, id);
}

TEST_CASE("pending actors: an elastic gang resized while it waits ends the asks it no longer makes",
          "[jobs][supervisor][pending][elastic]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = supervised(h, id, 3, true);
  for (auto& a : s.actors) a.type_name = "troupe.worker";  // a sync gang of three
  s.elastic = true;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("killed")), "killed");
  for (size_t i = 1; i < 3; ++i)
    h.supervisor.on_down(h.addr(*reply, i), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
  // No room: the gang waits, its three asks one PENDING record each, whatever the retries.
  h.fits = false;
  for (int retry = 0; retry < 5; ++retry) h.supervisor.retry_pending();
  CHECK(h.records_in(id, gcs::ActorState::pending) == 3u);
  // Room for one: the gang shrinks to 1 and starts; the two asks it no longer makes end.
  h.fits = true;
  h.room = 1;
  h.supervisor.retry_pending();
  CHECK(h.records_in(id, gcs::ActorState::pending) == 0u);
  CHECK(h.records_in(id, gcs::ActorState::alive) == 4u);  // the three first, and the one placed now
  dead_ones_never_placed(h, id);
}

TEST_CASE("a job the supervisor forgets leaves none of its groups' member keys, plans or generations, other jobs' "
          "kept", "[jobs][supervisor][groups]") {
  Harness h;
  const JobId id = h.record_job(), other = h.record_job();
  auto reply = submit_async(h, id);
  for (const std::string& g : {"job-" + id.hex(), "job-" + id.hex() + "-mirror", "job-" + other.hex()}) {
    REQUIRE(h.store.put(gcs::kGroupMembersTable, g + "/0/0", "m").ok());
    REQUIRE(gcs::announce_generation(h.store, g, 0).ok());
  }
  REQUIRE(gcs::put_group_plan(h.store, "job-" + id.hex(), 1, {0, 1}).ok());
  REQUIRE(h.supervisor.stop({id.hex(), "not needed"}).ok());
  for (int i = 0; i < 3; ++i)
    h.supervisor.on_down(h.addr(reply, i), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
  REQUIRE_FALSE(h.supervisor.supervises(id));
  CHECK(*h.store.keys(gcs::kGroupMembersTable) == std::vector<std::string>{"job-" + other.hex() + "/0/0"});
  CHECK(h.store.keys(gcs::kGroupPlansTable)->empty());
  CHECK(*h.store.keys(gcs::kGroupGenerationsTable) == std::vector<std::string>{"job-" + other.hex()});
}
