// The step timeline through the API (/api/jobs/<id>/timeline, JSON and Chrome trace), the
// straggler and stuck-collective findings, the job's collective group in /api/jobs/<id>, the
// events `since` filter — against an InMemoryStore — and the recorder of trainers/ that fills it.
#include <catch2/catch.hpp>

#include <thread>

#include "gcs/step_timeline.h"
#include "gcs/timeline_view.h"
#include "tests/dashboard/dashboard_fixture.h"
#include "trainers/report/step_timeline.h"

using namespace troupe;
using namespace troupe::testing;

namespace {

// `n` steps of one rank, each `own_ms` of work then `comm_ms` in the all-reduce.
std::vector<gcs::StepSample> steps_of(int n, double own_ms, double comm_ms, int64_t start_us) {
  std::vector<gcs::StepSample> out;
  for (int i = 0; i < n; ++i) {
    gcs::StepSample s;
    s.epoch = 1;
    s.step = i + 1;
    s.start_us = start_us;
    s.data_us = static_cast<int64_t>(own_ms * 100);
    s.compute_us = static_cast<int64_t>(own_ms * 800);
    s.optimizer_us = static_cast<int64_t>(own_ms * 100);
    s.comm_us = static_cast<int64_t>(comm_ms * 1000);
    s.samples = 32;
    s.loss = 2.0 / (i + 1);
    start_us = s.end_us();
    out.push_back(s);
  }
  return out;
}

gcs::WorkerLive live(int rank, const std::string& phase, int64_t since_ms, int64_t updated_ms) {
  gcs::WorkerLive w;
  w.rank = rank;
  w.phase = phase;
  w.phase_since_ms = since_ms;
  w.updated_ms = updated_ms;
  w.step = 7;
  return w;
}

}  // namespace

TEST_CASE("the timeline endpoint serves every worker's steps and names the straggler", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  const std::string job = c.running.id.hex();
  const int64_t t0 = gcs::now_ms() * 1000 - 10'000'000;
  // Worker 1 works 3x as long as worker 0, which waits for it in the all-reduce.
  REQUIRE(gcs::append_steps(f.store(), job, 0, steps_of(60, 10, 20, t0)).ok());
  REQUIRE(gcs::append_steps(f.store(), job, 1, steps_of(60, 30, 0.5, t0)).ok());
  f.start();

  Json t = f.ok("/api/jobs/" + job + "/timeline?steps=50");
  REQUIRE(t.at("workers").size() == 2);
  CHECK(t.at("workers")[0].at("steps").size() == 50);  // the newest 50
  CHECK(t.at("workers")[0].at("steps").back().at("step") == 60);
  CHECK(t.at("workers")[1].at("summary").at("mean_own_ms").get<double>() == Approx(30).epsilon(0.01));
  REQUIRE(t.at("straggler").is_object());
  CHECK(t.at("straggler").at("rank") == 1);
  CHECK(t.at("straggler").at("message").get<std::string>().find("worker 1 is the straggler") != std::string::npos);
  CHECK(t.at("stuck").is_null());

  // Workers within 25% of each other: no straggler.
  const std::string other = c.done.id.hex();
  REQUIRE(gcs::append_steps(f.store(), other, 0, steps_of(20, 10, 1, t0)).ok());
  REQUIRE(gcs::append_steps(f.store(), other, 1, steps_of(20, 11, 0.5, t0)).ok());
  CHECK(f.ok("/api/jobs/" + other + "/timeline").at("straggler").is_null());

  // The Chrome trace: a named track per worker, a step slice with its phases inside.
  Json trace = f.ok("/api/jobs/" + job + "/timeline?format=chrome&steps=10");
  std::set<std::string> tracks;
  int steps = 0, phases = 0;
  for (const Json& e : trace.at("traceEvents")) {
    if (e.at("name") == "thread_name") tracks.insert(e.at("args").at("name").get<std::string>());
    if (e.value("cat", "") == "step") ++steps;
    if (e.value("cat", "") == "phase") {
      ++phases;
      CHECK(e.at("ph") == "X");
      CHECK(e.at("dur").get<int64_t>() > 0);
    }
  }
  CHECK(tracks == std::set<std::string>{"worker 0", "worker 1"});
  CHECK(steps == 20);
  CHECK(phases == 80);  // data, forward/backward, communication, optimizer

  // One answer is bounded over all workers: a job of 50 gets at most 2000 steps each.
  c.done.workers = 50;
  REQUIRE(gcs::Table<gcs::JobRecord>(f.store()).put(c.done).ok());
  Json wide = f.ok("/api/jobs/" + other + "/timeline?steps=20000");
  CHECK(wide.at("steps_per_worker") == 2000);
  CHECK(wide.at("workers").size() == 50);

  // Bad input.
  CHECK(f.fails("/api/jobs/" + job + "/timeline?steps=0", 400).at("parameter") == "steps");
  CHECK(f.fails("/api/jobs/" + job + "/timeline?steps=abc", 400).at("parameter") == "steps");
  CHECK(f.fails("/api/jobs/" + job + "/timeline?format=svg", 400).at("parameter") == "format");
  CHECK(f.fails("/api/jobs/" + job + "/timeline?bogus=1", 400).at("parameter") == "bogus");
  CHECK(f.fails("/api/jobs/" + std::string(32, 'a') + "/timeline", 404).at("error") == "no job " + std::string(32, 'a'));
  CHECK(f.fails("/api/jobs/xyz/timeline", 400).at("parameter") == "id");
}

TEST_CASE("a stuck collective names the rank the others wait for", "[dashboard]") {
  gcs::InMemoryStore store;
  SeededCluster c = seed_cluster(store);  // c.running: RUNNING, 2 workers
  const std::string job = c.running.id.hex();
  c.running.workers = 3;
  const int64_t now = gcs::now_ms();
  gcs::TimelineOptions o;
  o.now_ms = now;

  // Ranks 0 and 2 in the all-reduce for 9 s; rank 1 silent for 8 s (dead or stopped).
  REQUIRE(gcs::put_live(store, job, live(0, "communication", now - 9000, now - 200)).ok());
  REQUIRE(gcs::put_live(store, job, live(1, "forward_backward", now - 9100, now - 8000)).ok());
  REQUIRE(gcs::put_live(store, job, live(2, "communication", now - 8500, now - 300)).ok());
  auto workers = gcs::read_job_timeline(store, c.running, 10);
  REQUIRE(workers.ok());
  Json t = gcs::timeline_json(c.running, *workers, o);
  INFO(t.dump());
  REQUIRE(t.at("stuck").is_object());
  CHECK(t.at("stuck").at("rank") == 1);
  CHECK(t.at("stuck").at("waiting_ranks") == Json::array({0, 2}));
  const std::string message = t.at("stuck").at("message");
  CHECK(message.find("ranks 0, 2 wait in the all-reduce") != std::string::npos);
  CHECK(message.find("for rank 1") != std::string::npos);
  CHECK(message.find("dead or stopped") != std::string::npos);

  // Rank 1 alive but still computing: it is named with its phase.
  REQUIRE(gcs::put_live(store, job, live(1, "data_wait", now - 9100, now - 100)).ok());
  workers = gcs::read_job_timeline(store, c.running, 10);
  REQUIRE(workers.ok());
  t = gcs::timeline_json(c.running, *workers, o);
  CHECK(t.at("stuck").at("rank") == 1);
  CHECK(t.at("stuck").at("message").get<std::string>().find("in data_wait") != std::string::npos);

  // Short waits are normal all-reduces; a finished job is never stuck.
  o.now_ms = now - 6000;
  CHECK(gcs::timeline_json(c.running, *workers, o).at("stuck").is_null());
  o.now_ms = now;
  c.running.state = gcs::JobState::failed;
  CHECK(gcs::timeline_json(c.running, *workers, o).at("stuck").is_null());
}

TEST_CASE("a parameter-server job's timeline: pull and push in the order a step runs them, a stuck pull named",
          "[dashboard]") {
  gcs::InMemoryStore store;
  SeededCluster c = seed_cluster(store);  // c.running: RUNNING, 2 workers
  gcs::JobRecord job = c.running;
  job.strategy = "async";
  const std::string hex = job.id.hex();
  const int64_t now = gcs::now_ms();
  // Worker 1 works 3x as long as worker 0 (its push counted as its own work).
  REQUIRE(gcs::append_steps(store, hex, 0, steps_of(20, 10, 2, now * 1000 - 5'000'000)).ok());
  REQUIRE(gcs::append_steps(store, hex, 1, steps_of(20, 30, 2, now * 1000 - 5'000'000)).ok());
  REQUIRE(gcs::put_live(store, hex, live(0, "communication", now - 7000, now - 100)).ok());
  REQUIRE(gcs::put_live(store, hex, live(1, "optimizer", now - 6000, now - 100)).ok());
  gcs::TimelineOptions o;
  o.now_ms = now;
  auto workers = gcs::read_job_timeline(store, job, 50);
  REQUIRE(workers.ok());
  Json t = gcs::timeline_json(job, *workers, o);
  INFO(t.dump());
  std::vector<std::string> keys, names;
  for (const Json& p : t.at("phases")) keys.push_back(p.at("key")), names.push_back(p.at("name"));
  CHECK(keys == std::vector<std::string>{"data_us", "comm_us", "compute_us", "optimizer_us"});
  CHECK(names == std::vector<std::string>{"data wait", "pull", "forward/backward", "push"});
  REQUIRE(t.at("straggler").is_object());
  CHECK(t.at("straggler").at("rank") == 1);
  CHECK(t.at("straggler").at("message").get<std::string>().find("forward/backward and push") != std::string::npos);
  CHECK(t.at("straggler").at("message").get<std::string>().find("in their pulls") != std::string::npos);
  REQUIRE(t.at("stuck").is_object());
  CHECK(t.at("stuck").at("waiting_ranks") == Json::array({0}));
  CHECK(t.at("stuck").at("rank") == 1);
  CHECK(t.at("stuck").at("message").get<std::string>().find("rank 0 waits in a pull from the parameter servers for 7.0 s "
                                                           "for rank 1 (it is in optimizer") != std::string::npos);

  // The Chrome trace draws each step's phases where they ran: data wait, pull, forward/backward, push.
  Json trace = gcs::chrome_trace(job, *workers);
  std::vector<std::string> first_step;
  int64_t at = -1;
  for (const Json& e : trace.at("traceEvents")) {
    if (e.value("cat", "") != "phase" || e.at("tid") != 0 || first_step.size() == 4) continue;
    first_step.push_back(e.at("name"));
    CHECK(e.at("ts").get<int64_t>() > at);  // one after the other
    at = e.at("ts").get<int64_t>();
  }
  CHECK(first_step == std::vector<std::string>{"data_wait", "pull", "forward_backward", "push"});

  // A sync job's phases keep their names and order.
  Json sync = gcs::timeline_json(c.running, *workers, o);
  CHECK(sync.at("phases")[2].at("name") == "communication");
  CHECK(sync.at("stuck").at("message").get<std::string>().find("rank 0 waits in the all-reduce") != std::string::npos);
}

TEST_CASE("a job's answer carries its collective group and the group's failures", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  const std::string job = c.running.id.hex();
  gcs::GroupRecord g;
  g.name = "job-" + job;
  g.generation = 0;
  g.world_size = 2;
  for (int r = 0; r < 2; ++r) g.members.push_back({r, c.worker.id, c.actors[5 + r].id, "127.0.0.1:" + std::to_string(7000 + r)});
  REQUIRE(gcs::Table<gcs::GroupRecord>(f.store()).put(g).ok());
  REQUIRE(gcs::record_event(f.store(), {0, "group_failed", g.name, "group 'job-..' generation 0 failed: rank 1 left"}).ok());
  f.start();
  Json j = f.ok("/api/jobs/" + job);
  const Json& cg = j.at("collective_group");
  CHECK(cg.at("name") == g.name);
  REQUIRE(cg.at("group").at("members").size() == 2);
  CHECK(cg.at("group").at("members")[1].at("address") == "127.0.0.1:7001");
  REQUIRE(cg.at("failures").size() == 1);
  CHECK(cg.at("failures")[0].at("message").get<std::string>().find("rank 1 left") != std::string::npos);
  // A job without a group (yet): null, no failures.
  Json other = f.ok("/api/jobs/" + c.done.id.hex());
  CHECK(other.at("collective_group").at("group").is_null());
  // The group's events by subject "job-<id prefix>".
  CHECK(f.ok("/api/events?subject=job-" + job.substr(0, 6)).at("events").size() == 1);
  CHECK(f.fails("/api/events?subject=job-zz", 400).at("parameter") == "subject");
}

TEST_CASE("events since a time: only newer ones, bad values refused", "[dashboard]") {
  DashboardFixture f;
  seed_cluster(f.store());  // 5 actor_started 5 s ago, node_died 10 ms ago
  f.start();
  const int64_t now = gcs::now_ms();
  CHECK(f.ok("/api/events").at("events").size() == 6);
  Json recent = f.ok("/api/events?since=" + std::to_string(now - 1000));
  REQUIRE(recent.at("events").size() == 1);
  CHECK(recent.at("events")[0].at("kind") == "node_died");
  CHECK(f.ok("/api/events?kind=actor_started&since=" + std::to_string(now - 60000)).at("events").size() == 5);
  CHECK(f.fails("/api/events?since=yesterday", 400).at("parameter") == "since");
  CHECK(f.fails("/api/events?since=-5", 400).at("parameter") == "since");
}

TEST_CASE("the step recorder times each phase of a step and drains completed steps", "[dashboard]") {
  StepRecorder rec(3);
  CHECK(rec.now().phase == StepPhase::idle);
  rec.begin(1, 1, 1000);  // the communicator had carried 1000 bytes before the step
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  rec.phase(StepPhase::forward_backward);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  rec.phase(StepPhase::communication);
  CHECK(rec.now().phase == StepPhase::communication);
  CHECK(rec.now().step == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  rec.phase(StepPhase::optimizer);
  rec.end(32, 0.5, 0.004, 1000 + 940'000);
  auto steps = rec.drain();
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].comm_bytes == 940'000);  // the step's own bytes
  CHECK(steps[0].data_us >= 5000);
  CHECK(steps[0].compute_us >= 10000);
  CHECK(steps[0].comm_us >= 5000);
  CHECK(steps[0].comm_busy_us == 4000);
  CHECK(steps[0].samples == 32);
  CHECK(steps[0].loss == 0.5);
  // Through the GCS and back with every field.
  {
    gcs::InMemoryStore store;
    REQUIRE(gcs::append_steps(store, std::string(32, 'c'), 0, steps).ok());
    auto back = gcs::read_steps(store, std::string(32, 'c'), 0, 10);
    REQUIRE(back.ok());
    REQUIRE(back->size() == 1u);
    CHECK((*back)[0].comm_bytes == 940'000);
    CHECK((*back)[0].comm_busy_us == 4000);
  }
  CHECK(rec.drain().empty());
  // Bounded between drains: the oldest are dropped and counted.
  for (int i = 2; i < 7; ++i) {
    rec.begin(1, i);
    rec.end(32, 0.5, 0.004);
  }
  int64_t dropped = 0;
  steps = rec.drain(&dropped);
  CHECK(steps.size() == 3);
  CHECK(steps.front().step == 4);
  CHECK(dropped == 2);
  rec.finish(StepPhase::done);
  CHECK(std::string(step_phase_name(rec.now().phase)) == "done");
}

TEST_CASE("step timelines in the GCS are bounded per rank and refuse garbage", "[dashboard]") {
  gcs::InMemoryStore store;
  const std::string job(32, 'b');
  for (int chunk = 0; chunk < 300; ++chunk) {  // more entries than the stream keeps
    REQUIRE(gcs::append_steps(store, job, 0, steps_of(10, 1, 1, chunk * 1000000)).ok());
  }
  auto all = gcs::read_steps(store, job, 0, gcs::kTimelineMaxSteps);
  REQUIRE(all.ok());
  CHECK(all->size() <= gcs::kTimelineChunks * 10 + 10);
  auto few = gcs::read_steps(store, job, 0, 7);
  REQUIRE(few.ok());
  CHECK(few->size() == 7);
  std::vector<gcs::StepSample> out;
  CHECK(gcs::decode_steps("not msgpack", &out).code() == Code::corrupt_data);
  REQUIRE(store.append(gcs::timeline_stream(job, 1), "\x93\x01\x02\x03", 10).ok());
  CHECK(!gcs::read_steps(store, job, 1, 10).ok());
}

TEST_CASE("the loss curve grows with every flush and comes with the timeline", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  const std::string job = c.running.id.hex();
  f.start();
  CHECK(f.ok("/api/jobs/" + job + "/timeline").at("loss_curve").empty());
  for (int i = 1; i <= 3; ++i) REQUIRE(gcs::append_loss_point(f.store(), job, {i * 100, 1.0 / i, gcs::now_ms()}).ok());
  Json curve = f.ok("/api/jobs/" + job + "/timeline").at("loss_curve");
  REQUIRE(curve.size() == 3);
  CHECK(curve[2] == Json::array({300, 1.0 / 3}));
}

TEST_CASE("timeline: the Chrome trace draws a job's last recovery on a job track, from the failure to the first step "
          "again") {
  gcs::JobRecord job;
  job.id = JobId::random();
  job.strategy = "sync";
  gcs::JobRecovery r;
  r.restarts = 1;
  r.mode = "live";
  r.cause = "worker-2 failed";
  r.failed_ms = 5000;
  r.detected_ms = 5040;
  r.resumed_ms = 5600;
  r.failed_step = 900;
  r.from_step = 900;
  r.source_rank = 1;
  r.bytes_moved = 4096;
  Json trace = gcs::chrome_trace(job, {}, r);
  Json recovery, detecting;
  for (const Json& e : trace.at("traceEvents")) {
    if (e.value("name", "") == "recovery (live)") recovery = e;
    if (e.value("name", "") == "detecting") detecting = e;
  }
  REQUIRE(recovery.is_object());
  CHECK(recovery.at("tid") == -1);
  CHECK(recovery.at("ts") == 5000000);
  CHECK(recovery.at("dur") == 600000);
  CHECK(recovery.at("args").at("steps_lost") == 0);
  CHECK(recovery.at("args").at("source_rank") == 1);
  REQUIRE(detecting.is_object());
  CHECK(detecting.at("dur") == 40000);
  r.resumed_ms = 0;  // not trained again yet: nothing drawn
  const Json waiting = gcs::chrome_trace(job, {}, r), never = gcs::chrome_trace(job, {});
  for (const Json& e : waiting.at("traceEvents")) CHECK(e.value("cat", "") != "recovery");
  for (const Json& e : never.at("traceEvents")) CHECK(e.value("cat", "") != "recovery");
}
