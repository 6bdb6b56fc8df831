// The head's job supervisor against a fake placement and fake node managers (the real ones are
// exercised end to end by tests/jobs): gang start or PENDING with the reason and a retry, RUNNING
// with the actors, a failing actor fails the job and stops the rest, servers stopped once the
// workers are done, troupe stop cancels, and bad submissions are refused.
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/actors/job_supervisor_harness.h"
#include "gcs/events.h"
#include "gcs/in_memory_store.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::actors::testing;


TEST_CASE("job supervisor: a job that fits starts RUNNING with its actors, each told its own id",
          "[jobs][supervisor]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(h.request(id));
  REQUIRE(reply.ok());
  CHECK(reply->started);
  REQUIRE(reply->actor_ids.size() == 3u);
  gcs::JobRecord j = h.job(id);
  CHECK(j.state == gcs::JobState::running);
  CHECK(j.actors == reply->actor_ids);
  REQUIRE(h.last_asks.size() == 3u);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(h.last_asks[i].actor.args.size() == 4u);  // {job, index} + the attempt + the actor's own id
    CHECK(h.last_asks[i].actor.args[2] == "0");
    CHECK(h.last_asks[i].actor.args.back() == reply->actor_ids[i]);
  }
  CHECK(j.message.find("running: 3 actors on 1 node") != std::string::npos);
  auto events = gcs::recent_events(h.store, 10);
  REQUIRE(events.ok());
  REQUIRE_FALSE(events->empty());
  CHECK(events->back().kind == "job_started");
}

TEST_CASE("job supervisor: a job that does not fit stays PENDING with the reason and starts on a retry",
          "[jobs][supervisor]") {
  Harness h;
  h.fits = false;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(h.request(id));
  REQUIRE(reply.ok());
  CHECK_FALSE(reply->started);
  CHECK(reply->pending_reason == h.reason);
  CHECK(h.job(id).state == gcs::JobState::pending);
  CHECK(h.job(id).message == "waiting for resources: " + h.reason);
  CHECK(h.supervisor.retry_pending());  // still waiting
  h.fits = true;
  CHECK_FALSE(h.supervisor.retry_pending());
  CHECK(h.job(id).state == gcs::JobState::running);
}

TEST_CASE("job supervisor: a failing actor fails the job naming it, and the others are stopped", "[jobs][supervisor]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(h.request(id));
  REQUIRE(reply.ok());
  CHECK(h.supervisor.on_down(h.addr(*reply, 1), to_error(internal_error("boom")), "worker 1: boom"));
  gcs::JobRecord j = h.job(id);
  CHECK(j.state == gcs::JobState::failed);
  CHECK(j.message.find("w1 (actor " + reply->actor_ids[1].substr(0, 8)) != std::string::npos);
  CHECK(j.message.find("failed: worker 1: boom") != std::string::npos);
  CHECK(was_stopped(h, *reply, 0));
  CHECK(was_stopped(h, *reply, 2));
  CHECK_FALSE(was_stopped(h, *reply, 1));
  CHECK(h.released.cpus == 1);
  // The others' exits (their collectives failed too) do not change the verdict.
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("peer gone")), "peer gone");
  CHECK(h.job(id).message.find("w1") != std::string::npos);
  CHECK_FALSE(h.supervisor.on_down(caf::actor_addr(), caf::error(), ""));  // not a job's actor
}

TEST_CASE("job supervisor: when the workers are done the servers are stopped, and the job stays as rank 0 left it",
          "[jobs][supervisor]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(h.request(id));
  REQUIRE(reply.ok());
  REQUIRE(gcs::update_job(h.store, id, gcs::finish_job(gcs::JobState::succeeded, "done")).ok());
  h.supervisor.on_down(h.addr(*reply, 0), caf::error(), "");
  CHECK(h.stopped.empty());  // a worker is still training
  h.supervisor.on_down(h.addr(*reply, 1), caf::error(), "");
  REQUIRE(h.stopped.size() == 1u);
  CHECK(was_stopped(h, *reply, 2));  // only the server
  h.supervisor.on_down(h.addr(*reply, 2), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
  CHECK(h.job(id).state == gcs::JobState::succeeded);
  CHECK(h.released.cpus == 3);
}

TEST_CASE("job supervisor: workers that exit without a result fail the job", "[jobs][supervisor]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob one = h.request(id);
  one.actors.resize(1);
  auto reply = h.supervisor.submit(one);
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 0), caf::error(), "");
  CHECK(h.job(id).state == gcs::JobState::failed);
  CHECK(h.job(id).message == "every worker exited, but none recorded a result");
}

TEST_CASE("job supervisor: stop cancels a running or pending job, and bad requests are refused", "[jobs][supervisor]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(h.request(id));
  REQUIRE(reply.ok());
  auto stopped = h.supervisor.stop({id.hex(), ""});
  REQUIRE(stopped.ok());
  CHECK(stopped->stopped == 3);
  CHECK(stopped->state == "CANCELLED");
  CHECK(h.stopped.size() == 3u);
  CHECK(h.job(id).message == "stopped by the user");
  auto again = h.supervisor.stop({id.hex(), ""});  // already ended: says so, changes nothing
  REQUIRE(again.ok());
  CHECK(again->state == "CANCELLED");

  h.fits = false;
  const JobId waiting = h.record_job();
  REQUIRE(h.supervisor.submit(h.request(waiting)).ok());
  REQUIRE(h.supervisor.stop({waiting.hex(), "not needed"}).ok());
  CHECK(h.job(waiting).state == gcs::JobState::cancelled);
  CHECK_FALSE(h.supervisor.retry_pending());  // nothing left waiting

  CHECK(h.supervisor.stop({JobId::random().hex(), ""}).status().code() == Code::not_found);
  auto unrecorded = h.supervisor.submit(h.request(JobId::random()));
  CHECK(unrecorded.status().code() == Code::not_found);
  CHECK(unrecorded.status().message().find("must be recorded before it is submitted") != std::string::npos);
  const JobId running = h.record_job();
  h.fits = true;
  REQUIRE(h.supervisor.submit(h.request(running)).ok());
  CHECK(h.supervisor.submit(h.request(running)).status().message().find("already submitted") != std::string::npos);
  SubmitJob empty;
  empty.job_id = h.record_job().hex();
  CHECK(h.supervisor.submit(empty).status().message().find("asks for no actors") != std::string::npos);
}

namespace {
// The DEAD record a node manager writes when one of its actors ends (actors/actor_state_writer.h).
void record_dead(gcs::InMemoryStore& store, const std::string& actor, const std::string& reason) {
  gcs::ActorRecord r;
  r.id = *ActorId::from_hex(actor);
  r.state = gcs::ActorState::dead;
  r.death_reason = reason;
  REQUIRE(gcs::Table<gcs::ActorRecord>(store).put(r).ok());
}
}  // namespace

TEST_CASE("job supervisor: an exit seen without its reason fails the job with the reason its node recorded",
          "[jobs][supervisor]") {
  // A worker failing in its first milliseconds ends before the head's watch reaches its node: CAF
  // then says exit_reason::unknown, and the job must still fail with what the worker said.
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(h.request(id));
  REQUIRE(reply.ok());
  const caf::error unknown = caf::make_error(caf::exit_reason::unknown);
  SECTION("the node's record is there already") {
    record_dead(h.store, reply->actor_ids[1], "crashed: job 1 worker 1: loading the data on node 2: no such file");
    CHECK(h.supervisor.on_down(h.addr(*reply, 1), unknown, "exited: exit_reason(unknown)"));
    CHECK_FALSE(h.supervisor.unexplained_exits());
    const gcs::JobRecord j = h.job(id);
    CHECK(j.state == gcs::JobState::failed);
    CHECK(j.message.find("failed: exited: job 1 worker 1: loading the data on node 2: no such file") != std::string::npos);
    CHECK(j.message.find("unknown") == std::string::npos);
    CHECK(was_stopped(h, *reply, 0));
  }
  SECTION("the node's record comes later: the job waits for it") {
    CHECK(h.supervisor.on_down(h.addr(*reply, 1), unknown, "exited: exit_reason(unknown)"));
    CHECK(h.supervisor.unexplained_exits());
    CHECK(h.supervisor.explain_exits());  // still nothing recorded
    CHECK(h.job(id).state == gcs::JobState::running);
    CHECK(h.released.cpus == 0);  // its cpu is given back with its exit, not before
    record_dead(h.store, reply->actor_ids[1], "crashed: worker 1: boom");
    CHECK_FALSE(h.supervisor.explain_exits());
    CHECK(h.job(id).state == gcs::JobState::failed);
    CHECK(h.job(id).message.find("failed: exited: worker 1: boom") != std::string::npos);
    CHECK(h.released.cpus == 1);
  }
  SECTION("a clean exit recorded is no failure") {
    record_dead(h.store, reply->actor_ids[0], "exited normally");
    CHECK(h.supervisor.on_down(h.addr(*reply, 0), unknown, "exited: exit_reason(unknown)"));
    CHECK_FALSE(h.supervisor.unexplained_exits());
    CHECK(h.job(id).state == gcs::JobState::running);
    CHECK(h.released.cpus == 1);
    CHECK_FALSE(was_stopped(h, *reply, 1));
  }
  SECTION("no record within the grace: the job fails saying so") {
    h.supervisor.set_exit_reason_grace(std::chrono::milliseconds(0));
    CHECK(h.supervisor.on_down(h.addr(*reply, 2), unknown, "exited: exit_reason(unknown)"));
    CHECK_FALSE(h.supervisor.explain_exits());
    const gcs::JobRecord j = h.job(id);
    CHECK(j.state == gcs::JobState::failed);
    CHECK(j.message.find("ps0 (actor " + reply->actor_ids[2].substr(0, 8)) != std::string::npos);
    CHECK(j.message.find("its node recorded no reason within 0 ms") != std::string::npos);
    CHECK(j.message.find("troupe logs " + id.short_hex()) != std::string::npos);
  }
}
