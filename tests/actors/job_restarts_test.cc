// The job supervisor's restarts (actors/job_restarts.cc) over the fake placement of
// job_supervisor_harness.h: a whole gang stopped and placed again after its backoff with the next
// attempt, a spent budget failing the job, a node declared dead counting as its actors' failure,
// an async job replacing only the failed worker, an async server's failure ending the job unless
// the job checkpoints (then the server is replaced, restoring its shard).
#include <catch2/catch.hpp>

#include <thread>

#include "gcs/events.h"
#include "gcs/job_table.h"
#include "tests/actors/job_supervisor_harness.h"

using namespace troupe;
using namespace troupe::actors;
using namespace troupe::actors::testing;

namespace {

SubmitJob with_restarts(SubmitJob s, int max_restarts, bool whole_gang) {
  s.max_restarts = max_restarts;
  s.restart_backoff_ms = 0;
  s.restart_whole_gang = whole_gang;
  return s;
}

int count_events(gcs::Store& store, const std::string& kind) {
  auto events = gcs::recent_events(store, 100);
  REQUIRE(events.ok());
  return static_cast<int>(std::count_if(events->begin(), events->end(), [&](const gcs::Event& e) { return e.kind == kind; }));
}

// Every actor of `reply` that is still running exits as a stopped actor does.
void stopped_ones_exit(Harness& h, const SubmitJobReply& reply, size_t except) {
  for (size_t i = 0; i < reply.actor_ids.size(); ++i) {
    if (i != except) h.supervisor.on_down(h.addr(reply, i), caf::make_error(caf::exit_reason::user_shutdown), "stopped");
  }
}

// Job `id`'s record says it has done `step` steps (as its rank 0 reports them).
void set_job_step(Harness& h, const JobId& id, int64_t step) {
  REQUIRE(gcs::update_job(h.store, id, [&](gcs::JobRecord& j) -> Status {
            j.step = step;
            return {};
          }).ok());
}

// The harness's job with 2 restarts (backoff 0), restarts placed as `restart_on` says.
SubmitJobReply submit_placed(Harness& h, const JobId& id, bool whole_gang, const std::string& restart_on) {
  SubmitJob s = with_restarts(h.request(id), 2, whole_gang);
  s.restart_on = restart_on;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  return *reply;
}

}  // namespace

TEST_CASE("job restarts: a failed worker stops the gang, which starts again as attempt 1 with new actors",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  const SubmitJobReply reply = submit_placed(h, id, true, "any");
  h.supervisor.on_down(h.addr(reply, 1), to_error(internal_error("killed")), "killed");
  // The job keeps RUNNING, says why it restarts, and the others are stopped.
  CHECK(h.job(id).state == gcs::JobState::running);
  CHECK(h.job(id).message.find("restart 1 of 2 after: w1") != std::string::npos);
  CHECK(was_stopped(h, reply, 0));
  CHECK(was_stopped(h, reply, 2));
  CHECK(count_events(h.store, "job_restarting") == 1);
  CHECK(h.supervisor.restarting());
  // Nothing is placed until every actor of the failed attempt is down.
  const size_t placed_before = h.spawned.size();
  CHECK(h.supervisor.retry_pending());  // waiting for them to exit
  CHECK(h.spawned.size() == placed_before);
  stopped_ones_exit(h, reply, 1);
  CHECK(h.supervisor.retry_pending() == false);  // backoff 0: placed now
  REQUIRE(h.spawned.size() == placed_before + 3);
  REQUIRE(h.last_asks.size() == 3u);
  for (const PlacementAsk& a : h.last_asks) {
    CHECK(a.actor.args.size() == 4u);
    CHECK(a.actor.args[2] == "1");  // the attempt
    CHECK(std::find(reply.actor_ids.begin(), reply.actor_ids.end(), a.id.hex()) == reply.actor_ids.end());
  }
  gcs::JobRecord j = h.job(id);
  CHECK(j.state == gcs::JobState::running);
  CHECK(j.actors[0] == h.last_asks[0].id.hex());
  CHECK(j.message.find("(restart 1)") != std::string::npos);
  CHECK(count_events(h.store, "job_restarted") == 1);
  CHECK_FALSE(h.supervisor.restarting());
}

TEST_CASE("job restarts: once the budget is spent the next failure fails the job naming it", "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(with_restarts(h.request(id), 1, true));
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("first")), "first");
  stopped_ones_exit(h, *reply, 0);
  h.supervisor.retry_pending();
  REQUIRE(h.last_asks.size() == 3u);
  const caf::actor_addr second = h.spawned.at(h.last_asks[2].id).address();
  h.supervisor.on_down(second, to_error(internal_error("second")), "second");
  gcs::JobRecord j = h.job(id);
  CHECK(j.state == gcs::JobState::failed);
  CHECK(j.message.find("ps0") != std::string::npos);
  CHECK(j.message.find("failed: second; no restarts left (all 1 used)") != std::string::npos);
}

TEST_CASE("job restarts: with no restarts allowed a failure fails the job at once", "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(with_restarts(h.request(id), 0, true));
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("boom")), "boom");
  CHECK(h.job(id).state == gcs::JobState::failed);
  CHECK(h.job(id).message.find("no restarts left") == std::string::npos);
}

TEST_CASE("job restarts: a node declared dead fails its actors even without their exits", "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(with_restarts(h.request(id), 3, true));
  REQUIRE(reply.ok());
  h.supervisor.on_node_dead(NodeId::random(), "another node");  // none of the job's
  CHECK(h.job(id).message.find("restart") == std::string::npos);
  h.supervisor.on_node_dead(h.node, "silent for 2000 ms");
  // Every actor was on that node: all are down, so the gang is placed again at once.
  CHECK(h.job(id).message.find("its node " + h.node.short_hex() + " is gone (silent for 2000 ms)") != std::string::npos);
  h.supervisor.retry_pending();
  REQUIRE(h.last_asks.size() == 3u);
  CHECK(h.last_asks[0].actor.args[2] == "1");
  // A late exit of an actor of the failed attempt changes nothing.
  h.supervisor.on_down(h.addr(*reply, 1), to_error(internal_error("late")), "late");
  CHECK(h.last_asks[0].actor.args[2] == "1");
  CHECK(h.job(id).state == gcs::JobState::running);
}

TEST_CASE("job restarts: an async job replaces only its failed worker, and a failed server ends it",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(with_restarts(h.request(id), 3, false));
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 1), to_error(internal_error("killed")), "killed");
  CHECK(h.stopped.empty());  // the others go on
  CHECK(h.supervisor.restarting());
  CHECK_FALSE(h.supervisor.retry_pending());
  REQUIRE(h.last_asks.size() == 1u);
  CHECK(h.last_asks[0].actor.name == "w1-a1");  // names are unique per node: the attempt is in it
  CHECK(h.last_asks[0].actor.args[1] == "1");  // the same rank
  CHECK(h.last_asks[0].actor.args[2] == "1");  // attempt 1
  CHECK(h.job(id).actors[1] == h.last_asks[0].id.hex());
  CHECK(h.job(id).actors[0] == reply->actor_ids[0]);
  // The server's failure: without checkpoints its shard cannot be restored, so the job fails and
  // the rest stop.
  h.supervisor.on_down(h.addr(*reply, 2), to_error(internal_error("killed")), "killed");
  CHECK(h.job(id).state == gcs::JobState::failed);
  CHECK(h.job(id).message.find("parameter server cannot be restored") != std::string::npos);
  CHECK(h.job(id).message.find("ps0") != std::string::npos);
  CHECK(h.job(id).message.find("--checkpoint-every") != std::string::npos);
  CHECK(was_stopped(h, *reply, 0));
}

TEST_CASE("job restarts: an async job that checkpoints replaces a failed server like a worker, within its budget",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = with_restarts(h.request(id), 1, false);
  s.restore_servers = true;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  REQUIRE(is_server_actor(h.last_asks[2].actor));
  h.supervisor.on_down(h.addr(*reply, 2), to_error(internal_error("killed")), "killed");
  // The job goes on: the workers keep training (and reconnect), only the server is placed again.
  CHECK(h.job(id).state == gcs::JobState::running);
  CHECK(h.stopped.empty());
  CHECK_FALSE(h.supervisor.retry_pending());
  REQUIRE(h.last_asks.size() == 1u);
  CHECK(is_server_actor(h.last_asks[0].actor));
  CHECK(h.last_asks[0].actor.name == "ps0-a1");
  CHECK(h.last_asks[0].actor.args[2] == "1");  // attempt 1: it restores its shard from the checkpoint
  CHECK(h.job(id).actors[2] == h.last_asks[0].id.hex());
  CHECK(count_events(h.store, "job_restarting") == 1);
  CHECK(count_events(h.store, "job_restarted") == 1);
  // The budget holds for servers too: the replacement failing again ends the job, naming it.
  const caf::actor_addr second = h.spawned.at(h.last_asks[0].id).address();
  h.supervisor.on_down(second, to_error(internal_error("killed again")), "killed again");
  CHECK(h.job(id).state == gcs::JobState::failed);
  CHECK(h.job(id).message.find("ps0-a1") != std::string::npos);
  CHECK(h.job(id).message.find("no restarts left (all 1 used)") != std::string::npos);
}

TEST_CASE("job restarts: a dead node that held an async job's worker and server has both replaced, the server first, "
          "as one restart", "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = with_restarts(h.request(id), 1, false);
  s.restore_servers = true;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  h.all_asks.clear();
  // The harness placed every actor on h.node: the node's death takes all three at once.
  h.supervisor.on_node_dead(h.node, "its connection dropped");
  CHECK(h.job(id).state == gcs::JobState::running);
  CHECK(h.stopped.empty());  // nobody to ask: their node is gone
  const std::string message = h.job(id).message;
  CHECK(message.find("restart 1 of 1") != std::string::npos);
  CHECK(message.find("ps0") < message.find("w0"));  // servers named (and placed) first
  CHECK_FALSE(h.supervisor.retry_pending());
  REQUIRE(h.all_asks.size() == 3u);
  CHECK(h.all_asks[0][0].actor.name == "ps0-a1");
  CHECK(h.all_asks[1][0].actor.name == "w0-a1");
  CHECK(h.all_asks[2][0].actor.name == "w1-a1");
  for (const auto& asks : h.all_asks) CHECK(asks[0].actor.args[2] == "1");  // one attempt for all
  CHECK(h.job(id).actors[0] == h.all_asks[1][0].id.hex());
  CHECK(h.job(id).actors[2] == h.all_asks[0][0].id.hex());
  CHECK(count_events(h.store, "job_restarting") == 1);
  CHECK(count_events(h.store, "job_restarted") == 3);
  CHECK_FALSE(h.supervisor.restarting());
}

TEST_CASE("job restarts: an async job's second loss before its restart placed anything joins that restart, one of the "
          "budget", "[jobs][supervisor][restarts]") {
  // Two nodes killed together reach the supervisor one by one: the second must not cost a restart
  // of its own (with a budget of 1 it would fail the job).
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = with_restarts(h.request(id), 1, false);
  s.restore_servers = true;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  h.all_asks.clear();
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("its node is gone")), "killed");
  h.supervisor.on_down(h.addr(*reply, 2), to_error(internal_error("its node is gone")), "killed");  // the server
  CHECK(h.job(id).state == gcs::JobState::running);
  CHECK(count_events(h.store, "job_restarting") == 1);
  CHECK(count_events(h.store, "job_restart_joined") == 1);
  CHECK_FALSE(h.supervisor.retry_pending());
  REQUIRE(h.all_asks.size() == 2u);
  CHECK(h.all_asks[0][0].actor.name == "ps0-a1");  // the joined server still placed first
  CHECK(h.all_asks[1][0].actor.name == "w0-a1");
  CHECK_FALSE(h.supervisor.restarting());
  // Once the replacements are placed, a new loss is a new failure: the budget of 1 is spent.
  h.supervisor.on_down(h.addr(*reply, 1), to_error(internal_error("killed")), "killed");
  CHECK(h.job(id).state == gcs::JobState::failed);
  CHECK(h.job(id).message.find("no restarts left") != std::string::npos);
}

TEST_CASE("job restarts: a dead node that held an async job's worker and server, without checkpoints, fails the job "
          "at once naming the server", "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(with_restarts(h.request(id), 3, false));
  REQUIRE(reply.ok());
  h.all_asks.clear();
  h.supervisor.on_node_dead(h.node, "its connection dropped");
  CHECK(h.job(id).state == gcs::JobState::failed);
  CHECK(h.job(id).message.find("ps0") != std::string::npos);
  CHECK(h.job(id).message.find("cannot be restored without checkpoints") != std::string::npos);
  h.supervisor.retry_pending();
  CHECK(h.all_asks.empty());  // no worker replaced against a server that cannot come back
}

TEST_CASE("job restarts: actors that do not exit after being stopped are left behind after a grace second",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  auto reply = h.supervisor.submit(with_restarts(h.request(id), 3, true));
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("killed")), "killed");
  // The other two were asked to stop but hang (a collective waiting on a peer behind a cut link).
  const size_t placed_before = h.spawned.size();
  h.supervisor.retry_pending();
  CHECK(h.spawned.size() == placed_before);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  h.supervisor.retry_pending();  // the grace is over: the stragglers' resources count free
  CHECK(h.released.cpus == 3);
  h.supervisor.retry_pending();  // and the gang is placed again
  CHECK(h.spawned.size() == placed_before + 3);
  CHECK(h.job(id).message.find("(restart 1)") != std::string::npos);
  // Their exits, when they come, change nothing.
  CHECK_FALSE(h.supervisor.on_down(h.addr(*reply, 1), to_error(internal_error("timeout")), "timeout"));
  CHECK(h.job(id).state == gcs::JobState::running);
}

TEST_CASE("job restarts: a job whose step count stands still past its progress timeout is restarted as stuck",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = with_restarts(h.request(id), 1, true);
  s.progress_timeout_ms = 300;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  for (int64_t step = 1; step <= 4; ++step) {  // moving: never stuck
    set_job_step(h, id, step * 10);
    h.supervisor.check_progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  CHECK(h.stopped.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  h.supervisor.check_progress();  // 40 for longer than 300 ms
  CHECK(h.stopped.size() == 3u);
  CHECK(h.job(id).message.find("the job made no progress for 0.3 s (stuck at step 40") != std::string::npos);
  CHECK(count_events(h.store, "job_restarting") == 1);
}

TEST_CASE("job restarts: a job stopped between two attempts is cancelled and not placed again", "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = with_restarts(h.request(id), 3, true);
  s.restart_backoff_ms = 60000;  // the next attempt is a minute away
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  h.supervisor.on_down(h.addr(*reply, 0), to_error(internal_error("killed")), "killed");
  stopped_ones_exit(h, *reply, 0);
  REQUIRE(h.supervisor.stop({id.hex(), "not needed"}).ok());
  CHECK(h.job(id).state == gcs::JobState::cancelled);
  const size_t placed = h.spawned.size();
  CHECK_FALSE(h.supervisor.retry_pending());
  CHECK_FALSE(h.supervisor.restarting());
  CHECK(h.spawned.size() == placed);
}

TEST_CASE("job restarts: --restart-on same pins the restart to the nodes the actors ran on, other keeps the failed "
          "one off its node",
          "[jobs][supervisor][restarts]") {
  SECTION("same: every slot of the gang back on its node") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submit_placed(h, id, true, "same");
    h.supervisor.on_down(h.addr(reply, 1), to_error(internal_error("threw")), "threw");
    stopped_ones_exit(h, reply, 1);
    h.supervisor.retry_pending();
    REQUIRE(h.last_asks.size() == 3u);
    for (const PlacementAsk& a : h.last_asks) {
      REQUIRE(a.pin.has_value());
      CHECK(*a.pin == h.node);
      CHECK_FALSE(a.avoid.has_value());
    }
    auto events = gcs::recent_events(h.store, 20);
    REQUIRE(events.ok());
    bool said = false;
    for (const gcs::Event& e : *events)
      said = said || (e.kind == "job_restarting" && e.message.find("each on the node it ran on") != std::string::npos);
    CHECK(said);
  }
  SECTION("same, but the node is gone: anywhere") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submit_placed(h, id, true, "same");
    h.supervisor.on_node_dead(h.node, "killed");
    h.supervisor.retry_pending();
    REQUIRE(h.last_asks.size() == 3u);
    for (const PlacementAsk& a : h.last_asks) CHECK_FALSE(a.pin.has_value());
  }
  SECTION("other: the failed actor anywhere but its node, the rest anywhere") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submit_placed(h, id, true, "other");
    h.supervisor.on_down(h.addr(reply, 2), to_error(internal_error("bad disk")), "bad disk");
    stopped_ones_exit(h, reply, 2);
    h.supervisor.retry_pending();
    REQUIRE(h.last_asks.size() == 3u);
    CHECK_FALSE(h.last_asks[0].avoid.has_value());
    CHECK_FALSE(h.last_asks[1].avoid.has_value());
    REQUIRE(h.last_asks[2].avoid.has_value());
    CHECK(*h.last_asks[2].avoid == h.node);
    // The next restart decides again: after a failure of slot 0 only slot 0 is kept off.
    const caf::actor_addr first = h.spawned.at(h.last_asks[0].id).address();
    const auto second_attempt = h.last_asks;
    h.supervisor.on_down(first, to_error(internal_error("again")), "again");
    for (size_t i = 1; i < 3; ++i)
      h.supervisor.on_down(h.spawned.at(second_attempt[i].id).address(),
                           caf::make_error(caf::exit_reason::user_shutdown), "stopped");
    h.supervisor.retry_pending();
    REQUIRE(h.last_asks.size() == 3u);
    CHECK(h.last_asks[0].avoid.has_value());
    CHECK_FALSE(h.last_asks[2].avoid.has_value());
  }
  SECTION("other, async: the replacement of the failed worker only") {
    Harness h;
    const JobId id = h.record_job();
    const SubmitJobReply reply = submit_placed(h, id, false, "other");
    h.supervisor.on_down(h.addr(reply, 1), to_error(internal_error("threw")), "threw");
    h.supervisor.retry_pending();
    REQUIRE(h.last_asks.size() == 1u);
    REQUIRE(h.last_asks[0].avoid.has_value());
    CHECK(*h.last_asks[0].avoid == h.node);
  }
}

TEST_CASE("job restarts: a live sync job replaces only its failed worker, but restarts the whole gang when stuck",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = with_restarts(h.request(id), 3, false);
  s.live_recovery = true;
  s.progress_timeout_ms = 300;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  // A worker fails: only it is replaced (attempt 1, same rank); the survivors keep their state.
  h.supervisor.on_down(h.addr(*reply, 1), to_error(internal_error("killed")), "killed");
  CHECK(h.stopped.empty());
  CHECK_FALSE(h.supervisor.retry_pending());
  REQUIRE(h.last_asks.size() == 1u);
  CHECK(h.last_asks[0].actor.args[1] == "1");  // the same rank
  CHECK(h.last_asks[0].actor.args[2] == "1");  // attempt 1: the generation the group re-forms at
  CHECK(count_events(h.store, "job_restarting") == 1);
  // Then its step count stands still: nobody knows who hangs, so every actor is stopped and the
  // gang placed again (from the checkpoint), unlike an async job.
  REQUIRE(gcs::update_job(h.store, id, [&](gcs::JobRecord& j) -> Status {
    j.state = gcs::JobState::running;
    j.step = 40;
    return {};
  }).ok());
  h.supervisor.check_progress();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  h.supervisor.check_progress();
  CHECK(h.stopped.size() >= 2u);
  CHECK(h.job(id).message.find("stuck at step 40") != std::string::npos);
  CHECK(count_events(h.store, "job_restarting") == 2);
}

TEST_CASE("job restarts: the backoff doubles while failures come before the job moves on, and starts over once it did",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  SubmitJob s = with_restarts(h.request(id), 10, false);  // worker by worker
  s.restart_backoff_ms = 100;
  auto reply = h.supervisor.submit(s);
  REQUIRE(reply.ok());
  // Worker 0's slot fails at each step given, and its replacement is placed after the backoff.
  std::vector<std::string> waits;
  caf::actor_addr current = h.addr(*reply, 0);
  for (int64_t step : {50, 50, 50, 60, 61}) {
    set_job_step(h, id, step);
    h.supervisor.on_down(current, to_error(internal_error("killed")), "killed");
    auto events = gcs::recent_events(h.store, 100);
    REQUIRE(events.ok());
    std::string newest;
    for (const gcs::Event& e : *events)
      if (e.kind == "job_restarting") newest = e.message;  // oldest first: the last is the newest
    const size_t in = newest.find(" in "), ms = newest.find(" ms while");
    REQUIRE(in != std::string::npos);
    REQUIRE(ms != std::string::npos);
    waits.push_back(newest.substr(in + 4, ms - in - 4));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(waits.back()) + 20));
    REQUIRE(h.supervisor.retry_pending() == false);  // the replacement placed
    REQUIRE_FALSE(h.last_asks.empty());
    current = h.spawned.at(h.last_asks.back().id).address();
  }
  // 50 (progress from nothing), 50 and 50 again (a loop: 200, 400), 60 (it moved on), 61 (again).
  CHECK(waits == std::vector<std::string>{"100", "200", "400", "100", "100"});
}

TEST_CASE("job restarts: an actor failing after its job recorded success restarts nothing",
          "[jobs][supervisor][restarts]") {
  Harness h;
  const JobId id = h.record_job();
  const SubmitJobReply reply = submit_placed(h, id, false, "any");
  const size_t asked = h.last_asks.size();
  // Rank 0 recorded the result; a worker placed as the job ended fails waiting for its peers.
  REQUIRE(gcs::update_job(h.store, id, [](gcs::JobRecord& j) -> Status {
            j.state = gcs::JobState::succeeded;
            return {};
          }).ok());
  h.supervisor.on_down(h.addr(reply, 1), to_error(internal_error("no peers")), "no peers");
  CHECK(count_events(h.store, "job_restarting") == 0);
  CHECK(h.supervisor.retry_pending() == false);
  CHECK(h.last_asks.size() == asked);  // no replacement asked for
  CHECK(h.job(id).state == gcs::JobState::succeeded);
}
