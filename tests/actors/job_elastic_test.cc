// The job supervisor's elastic sync jobs (actors/job_elastic.cc) over the fake placement of
// job_supervisor_harness.h: a restart without room for every worker goes on with those that fit,
// telling them the gang's size, and the job grows back to full size after the next checkpoint once
// there is room, without spending a restart of its budget.
#include <catch2/catch.hpp>

#include "gcs/events.h"
#include "gcs/group_plan.h"
#include "gcs/job_table.h"
#include "tests/actors/job_supervisor_harness.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::actors::testing;

namespace {

SubmitJob elastic_job(const JobId& id, int workers) {
  SubmitJob s;
  s.job_id = id.hex();
  for (int r = 0; r < workers; ++r) s.actors.push_back({"troupe.worker", "w" + std::to_string(r), 1, 0, {id.hex(), std::to_string(r)}});
  s.max_restarts = 2;
  s.restart_whole_gang = true;
  s.elastic = true;
  return s;
}

std::vector<std::string> event_messages(gcs::Store& store, const std::string& kind) {
  auto events = gcs::recent_events(store, 100);
  REQUIRE(events.ok());
  std::vector<std::string> out;
  for (const gcs::Event& e : *events)
    if (e.kind == kind) out.push_back(e.message);
  return out;
}

// The running actors of the job's record exit as stopped actors do (all but `except`).
void all_exit(Harness& h, const std::vector<std::string>& ids, const std::string& except = "") {
  for (const std::string& id : ids)
    if (id != except)
      h.supervisor.on_down(h.spawned.at(*ActorId::from_hex(id)).address(), caf::make_error(caf::exit_reason::user_shutdown),
                           "stopped");
}

}  // namespace

TEST_CASE("elastic job: a restart without room for all goes on with those that fit and grows back after a checkpoint",
          "[jobs][supervisor][elastic]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(elastic_job(id, 4));
  REQUIRE(reply.ok());
  REQUIRE(reply->started);
  for (const PlacementAsk& a : h.last_asks) {
    REQUIRE(a.actor.args.size() == 5u);  // job, index, world, attempt, actor id
    CHECK(a.actor.args[2] == "4");
    CHECK(a.actor.args[3] == "0");
  }

  // Worker 3's node is lost; only 2 workers fit now.
  h.supervisor.on_down(h.addr(*reply, 3), to_error(internal_error("killed")), "killed");
  all_exit(h, reply->actor_ids, reply->actor_ids[3]);
  h.room = 2;
  CHECK(h.supervisor.retry_pending() == false);
  REQUIRE(h.last_asks.size() == 2u);
  for (size_t r = 0; r < 2; ++r) {
    CHECK(h.last_asks[r].actor.args[1] == std::to_string(r));
    CHECK(h.last_asks[r].actor.args[2] == "2");  // the gang's size
    CHECK(h.last_asks[r].actor.args[3] == "1");  // the attempt
  }
  gcs::JobRecord j = h.job(id);
  CHECK(j.state == gcs::JobState::running);
  CHECK(j.actors.size() == 2u);
  auto resized = event_messages(h.store, "job_resized");
  REQUIRE(resized.size() == 1u);
  CHECK(resized[0].find("continues with 2 of 4 workers") != std::string::npos);

  // Room for the missing two: nothing happens until a checkpoint newer than what was there.
  const std::vector<std::string> small = j.actors;
  const size_t stops = h.stopped.size();
  h.supervisor.check_progress();
  h.supervisor.check_progress();
  CHECK(h.stopped.size() == stops);
  gcs::CheckpointRecord cp;
  cp.job = id;
  cp.step = 40;
  REQUIRE(gcs::Table<gcs::CheckpointRecord>(h.store).put(cp).ok());
  h.supervisor.check_progress();
  CHECK(h.stopped.size() == stops + 2);  // the small gang restarts from step 40
  CHECK(event_messages(h.store, "job_resizing").size() == 1u);
  all_exit(h, small);
  h.room = 4;
  CHECK(h.supervisor.retry_pending() == false);
  REQUIRE(h.last_asks.size() == 4u);
  CHECK(h.last_asks[0].actor.args[2] == "4");
  CHECK(h.last_asks[0].actor.args[3] == "2");
  resized = event_messages(h.store, "job_resized");
  REQUIRE(resized.size() == 2u);
  CHECK((resized[0].find("grows back to 4 workers") != std::string::npos ||
         resized[1].find("grows back to 4 workers") != std::string::npos));
  CHECK(h.job(id).actors.size() == 4u);

  // The grow-back spent no restart: the next failure is restart 2 of 2.
  const std::vector<std::string> full = h.job(id).actors;
  h.supervisor.on_down(h.spawned.at(*ActorId::from_hex(full[1])).address(), to_error(internal_error("killed")), "killed");
  CHECK(h.job(id).message.find("restart 2 of 2") != std::string::npos);
}

TEST_CASE("elastic job: with room for every worker a restart keeps the full size", "[jobs][supervisor][elastic]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(elastic_job(id, 3));
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("killed")), "killed");
  all_exit(h, reply->actor_ids, reply->actor_ids[0]);
  CHECK(h.supervisor.retry_pending() == false);
  REQUIRE(h.last_asks.size() == 3u);
  CHECK(h.last_asks[2].actor.args[2] == "3");
  CHECK(event_messages(h.store, "job_resized").empty());
}

TEST_CASE("elastic job, live: a lost worker with no room is dropped and the survivors renumbered, and room brings it "
          "back without a restart of the budget", "[jobs][supervisor][elastic][live]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = elastic_job(id, 4);
  s.restart_whole_gang = false;  // live: the survivors stay
  s.live_recovery = true;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  REQUIRE(reply->started);
  const std::string group = "job-" + id.hex();

  // Worker 1's node is lost and there is no room for a replacement: 0, 2 and 3 go on as ranks 0..2.
  h.fits = false;
  const size_t asked = h.last_asks.size();
  h.supervisor.on_down(h.addr(*reply, 1), to_error(internal_error("killed")), "killed");
  CHECK(h.stopped.empty());  // nobody else is stopped
  CHECK(h.supervisor.retry_pending() == false);
  CHECK(h.last_asks.size() == asked);  // no replacement asked for
  auto plan = gcs::group_plan(h.store, group, 1);
  REQUIRE(plan.ok());
  REQUIRE(plan->has_value());
  CHECK(**plan == std::vector<int>{0, 2, 3});
  CHECK(gcs::rank_in_plan(**plan, 3) == 2);
  CHECK(gcs::rank_in_plan(**plan, 1) == -1);
  auto resized = event_messages(h.store, "job_resized");
  REQUIRE(resized.size() == 1u);
  CHECK(resized[0].find("continues with 3 of 4 workers (no room for slot 1), from the survivors' memory") !=
        std::string::npos);
  CHECK(h.job(id).message.find("restart 1 of 2") != std::string::npos);

  // Room again: slot 1 joins at generation 2 (the gang's size 4 in its arguments), no one stops.
  h.fits = true;
  h.supervisor.check_progress();
  CHECK(event_messages(h.store, "job_resizing").size() == 1u);
  CHECK(h.supervisor.retry_pending() == false);
  REQUIRE(h.last_asks.size() == 1u);
  CHECK(h.last_asks[0].actor.args[1] == "1");
  CHECK(h.last_asks[0].actor.args[2] == "4");
  CHECK(h.last_asks[0].actor.args[3] == "2");
  CHECK(h.stopped.empty());
  plan = gcs::group_plan(h.store, group, 2);
  REQUIRE(plan.ok());
  REQUIRE(plan->has_value());
  CHECK(**plan == std::vector<int>{0, 1, 2, 3});
  resized = event_messages(h.store, "job_resized");
  REQUIRE(resized.size() == 2u);
  CHECK((resized[0].find("grows back to 4 of 4 workers") != std::string::npos ||
         resized[1].find("grows back to 4 of 4 workers") != std::string::npos));

  // The grow-back spent no restart: the next failure (room for its replacement) is restart 2 of 2,
  // and keeps the size.
  h.supervisor.on_down(h.addr(*reply, 2), to_error(internal_error("killed")), "killed");
  CHECK(h.job(id).message.find("restart 2 of 2") != std::string::npos);
  CHECK(h.supervisor.retry_pending() == false);
  plan = gcs::group_plan(h.store, group, 3);
  REQUIRE(plan.ok());
  REQUIRE(plan->has_value());
  CHECK(**plan == std::vector<int>{0, 1, 2, 3});
  CHECK(event_messages(h.store, "job_resized").size() == 2u);
}
