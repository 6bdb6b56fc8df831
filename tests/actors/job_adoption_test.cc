// A restarted head's job supervisor taking over running jobs (actors/job_adoption.cc) over the fake
// placement of job_supervisor_harness.h: the submission is saved in the GCS and read back; live
// actors are supervised again (a later failure restarts the gang as the first head would); actors
// lost while no head watched count as failures (the gang restarts from its checkpoint, an async
// job replaces only them); a job that was still PENDING is placed; a bad record is named.
#include <catch2/catch.hpp>

#include "actors/job_submissions.h"
#include "gcs/events.h"
#include "tests/actors/job_supervisor_harness.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::actors::testing;

namespace {

// The members of `reply`'s actors as a restarted head finds them: alive (with handles) except the
// slots in `lost`.
std::vector<JobSupervisor::AdoptedMember> members_of(Harness& h, const SubmitJobReply& reply,
                                                     const std::set<size_t>& lost = {}) {
  std::vector<JobSupervisor::AdoptedMember> out;
  for (size_t i = 0; i < reply.actor_ids.size(); ++i) {
    JobSupervisor::AdoptedMember m;
    m.id = *ActorId::from_hex(reply.actor_ids[i]);
    m.node = h.node;
    if (lost.count(i)) m.lost_reason = "killed";
    else m.handle = h.spawned.at(m.id);
    out.push_back(m);
  }
  return out;
}

// Job `id` submitted to the first head with `max_restarts` and no backoff; its reply.
SubmitJobReply submitted(Harness& h, const JobId& id, int max_restarts, bool whole_gang = true) {
  SubmitJob s = h.request(id);
  s.max_restarts = max_restarts;
  s.restart_backoff_ms = 0;
  s.restart_whole_gang = whole_gang;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  return *reply;
}

bool has_event(gcs::Store& store, const std::string& kind, const std::string& text) {
  auto events = gcs::recent_events(store, 100);
  REQUIRE(events.ok());
  for (const gcs::Event& e : *events)
    if (e.kind == kind && e.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("job adoption: the submission is kept in the GCS and a bad record is named", "[jobs][supervisor][adoption]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = h.request(id);
  s.max_restarts = 4;
  s.restart_backoff_ms = 250;
  s.restart_whole_gang = false;
  s.restore_servers = true;
  s.progress_timeout_ms = 9000;
  s.policy = "pack";
  REQUIRE(h.supervisor.submit(s).ok());
  auto back = load_submission(h.store, id);
  REQUIRE(back.ok());
  CHECK(back->job_id == id.hex());
  CHECK(back->policy == "pack");
  REQUIRE(back->actors.size() == 3u);
  CHECK(back->actors[2].type_name == "troupe.ps");
  CHECK(back->actors[1].args == s.actors[1].args);
  CHECK(back->max_restarts == 4);
  CHECK(back->restart_backoff_ms == 250);
  CHECK_FALSE(back->restart_whole_gang);
  CHECK(back->restore_servers);
  CHECK(back->progress_timeout_ms == 9000);
  CHECK(load_submission(h.store, JobId::random()).status().code() == Code::not_found);
  REQUIRE(h.store.put("job_submissions", id.hex(), "{not json").ok());
  auto bad = load_submission(h.store, id);
  CHECK(bad.status().code() == Code::corrupt_data);
  CHECK(bad.status().message().find(id.short_hex()) != std::string::npos);
}

TEST_CASE("job adoption: live actors are supervised again, and a later failure restarts the gang",
          "[jobs][supervisor][adoption]") {
  Harness h;
  const JobId id = h.record_job();
  const SubmitJobReply reply = submitted(h, id, 2);
  JobSupervisor restarted(h.host());  // the new head's supervisor, on the same GCS and nodes
  restarted.adopt(*load_submission(h.store, id), 0, members_of(h, reply));
  CHECK(has_event(h.store, "job_adopted", "3 of 3 actors alive (attempt 0)"));
  CHECK(h.job(id).state == gcs::JobState::running);
  CHECK(h.stopped.empty());
  // A worker fails later: the new head restarts the gang like the old one would have.
  CHECK(restarted.on_down(h.addr(reply, 1), to_error(internal_error("killed")), "killed"));
  CHECK(h.job(id).message.find("restart 1 of 2 after: w1") != std::string::npos);
  CHECK(was_stopped(h, reply, 0));
  CHECK(was_stopped(h, reply, 2));
}

TEST_CASE("job adoption: actors lost while no head watched restart the gang, or only themselves in async",
          "[jobs][supervisor][adoption]") {
  SECTION("a gang: the survivors are stopped and, once down, the gang is placed again as the next attempt") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submitted(h, id, 3);
    JobSupervisor restarted(h.host());
    restarted.adopt(*load_submission(h.store, id), 1, members_of(h, reply, {0}));
    CHECK(has_event(h.store, "job_restarting", "lost while the head was down (killed)"));
    CHECK(h.job(id).message.find("restart 2 of 3") != std::string::npos);  // it was in attempt 1
    CHECK(was_stopped(h, reply, 1));
    for (size_t i : {1u, 2u}) restarted.on_down(h.addr(reply, i), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
    const size_t before = h.spawned.size();
    CHECK_FALSE(restarted.retry_pending());
    REQUIRE(h.spawned.size() == before + 3);
    CHECK(h.last_asks[0].actor.args[2] == "2");
  }
  SECTION("every actor lost: placed again at once") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submitted(h, id, 1);
    JobSupervisor restarted(h.host());
    restarted.adopt(*load_submission(h.store, id), 0, members_of(h, reply, {0, 1, 2}));
    const size_t before = h.spawned.size();
    CHECK_FALSE(restarted.retry_pending());
    CHECK(h.spawned.size() == before + 3);
  }
  SECTION("async: only the lost worker is replaced") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submitted(h, id, 2, false);
    JobSupervisor restarted(h.host());
    restarted.adopt(*load_submission(h.store, id), 0, members_of(h, reply, {1}));
    CHECK(h.stopped.empty());
    const size_t before = h.spawned.size();
    restarted.retry_pending();
    REQUIRE(h.spawned.size() == before + 1);
    CHECK(h.last_asks.size() == 1u);
    CHECK(h.last_asks[0].actor.name.rfind("w1", 0) == 0);
  }
  SECTION("no restarts left: the job fails naming the lost actor") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submitted(h, id, 0);
    JobSupervisor restarted(h.host());
    restarted.adopt(*load_submission(h.store, id), 0, members_of(h, reply, {2}));
    CHECK(h.job(id).state == gcs::JobState::failed);
    CHECK(h.job(id).message.find("ps0") != std::string::npos);
  }
}

TEST_CASE("job adoption: a job still PENDING is placed by the restarted head", "[jobs][supervisor][adoption]") {
  Harness h;
  h.fits = false;
  const JobId id = h.record_job();
  REQUIRE(h.supervisor.submit(h.request(id)).ok());
  REQUIRE(h.spawned.empty());
  h.fits = true;
  JobSupervisor restarted(h.host());
  restarted.adopt(*load_submission(h.store, id), 0, {});
  CHECK_FALSE(restarted.retry_pending());
  CHECK(h.spawned.size() == 3u);
  CHECK(h.job(id).state == gcs::JobState::running);
}
