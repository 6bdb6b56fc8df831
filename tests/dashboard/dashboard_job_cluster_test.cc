// A sync job on a real cluster as the dashboard and `troupe timeline` show it: every worker's step
// timeline recorded by the runtime (a Chrome trace with a track per worker, each step's phases
// inside it), the loss curve, the collective group's members, the job's lines in every node's log.
#include <catch2/catch.hpp>

#include <set>

#include "tests/cluster/cluster_fixture.h"
#include "tests/dashboard/dashboard_url.h"

using namespace troupe::testing;

TEST_CASE("a sync job's step timeline, loss curve, group and logs reach troupe timeline and the dashboard",
          "[cluster][jobs]") {
  ClusterFixture c;
  auto up = c.up("--nodes 1 --cpus 2");
  const DashboardUrl url = dashboard_url(up.out);
  auto submitted = c.troupe("submit --strategy sync --workers 2 --epochs 1 --batch-size 64 --json --no-progress", 300);
  INFO(submitted.both() << c.logs_tail());
  REQUIRE(submitted.exit_code == 0);
  const Json summary = Json::parse(submitted.last_line());
  const std::string job = summary.at("job_id");
  const int64_t steps = summary.at("steps");  // 937: 60000 / 64

  // troupe timeline: a Chrome trace, one named track per worker, every step's phases inside its slice.
  auto trace_out = c.troupe("timeline " + job.substr(0, 8) + " --steps 20000", 60);
  INFO(trace_out.err);
  REQUIRE(trace_out.exit_code == 0);
  const Json trace = Json::parse(trace_out.out);
  std::set<std::string> tracks;
  std::map<int, std::vector<Json>> slices;  // tid -> step slices
  std::map<int, int64_t> phase_us;          // tid -> sum of phase durations
  for (const Json& e : trace.at("traceEvents")) {
    if (e.at("name") == "thread_name") tracks.insert(e.at("args").at("name").get<std::string>());
    if (e.value("cat", "") == "step") slices[e.at("tid").get<int>()].push_back(e);
    if (e.value("cat", "") == "phase") phase_us[e.at("tid").get<int>()] += e.at("dur").get<int64_t>();
  }
  CHECK(tracks == std::set<std::string>{"worker 0", "worker 1"});
  for (int rank : {0, 1}) {
    INFO("worker " << rank);
    // Every step trained is there (the newest 200 flushes are kept: a short job keeps all).
    REQUIRE(static_cast<int64_t>(slices[rank].size()) == steps);
    int64_t slice_us = 0, last_step = 0, last_end = 0;
    for (const Json& s : slices[rank]) {
      const int64_t step = s.at("args").at("step");
      CHECK(step == last_step + 1);
      CHECK(s.at("ts").get<int64_t>() >= last_end);  // in order, never overlapping
      last_step = step;
      last_end = s.at("ts").get<int64_t>() + s.at("dur").get<int64_t>();
      slice_us += s.at("dur").get<int64_t>();
    }
    CHECK(phase_us[rank] == slice_us);  // the phases fill their step exactly
  }

  // The same through the dashboard, with the loss curve and the finished workers' phase.
  const Json t = get_json(url, "/api/jobs/" + job + "/timeline?steps=100");
  REQUIRE(t.at("workers").size() == 2);
  for (const Json& w : t.at("workers")) {
    CHECK(w.at("steps").size() == 100);
    // Every step's collectives: the mlp's 235,146 gradients as f32 and the 2 loss/accuracy slots.
    for (const Json& st : w.at("steps")) CHECK(st.at("comm_bytes") == 235146 * 4 + 2 * 4);
    CHECK(w.at("live").at("phase") == "done");
    CHECK(w.at("summary").at("mean_step_ms").get<double>() > 0);
  }
  CHECK(t.at("stuck").is_null());  // a finished job is never stuck
  const Json& curve = t.at("loss_curve");
  REQUIRE(curve.size() >= 2);
  CHECK(curve.back()[0].get<int64_t>() == steps);
  CHECK(curve.back()[1].get<double>() < curve.front()[1].get<double>());  // it learned

  // The job page's group: both workers, on the nodes their actors run on.
  const Json j = get_json(url, "/api/jobs/" + job);
  const Json& group = j.at("collective_group").at("group");
  REQUIRE(group.at("members").size() == 2);
  std::set<std::string> member_nodes, actor_nodes;
  for (const Json& m : group.at("members")) member_nodes.insert(m.at("node").get<std::string>());
  for (const Json& a : j.at("actors")) actor_nodes.insert(a.at("node").get<std::string>());
  CHECK(member_nodes == actor_nodes);

  // The logs: the job's lines from the nodes that ran its workers, nothing unavailable here.
  const Json logs = get_json(url, "/api/logs?job=" + job.substr(0, 10) + "&lines=50");
  CHECK(logs.at("unavailable").empty());
  std::set<std::string> with_lines;
  for (const Json& l : logs.at("logs")) {
    if (!l.at("lines").empty()) with_lines.insert(l.at("node").get<std::string>());
  }
  for (const std::string& n : actor_nodes) CHECK(with_lines.count(n) == 1);  // (the head logs about jobs too)

  // A job that does not exist: an error, not an empty trace.
  auto missing = c.troupe("timeline 0123abcd", 30);
  CHECK(missing.exit_code != 0);
  CHECK(missing.err.find("0123abcd") != std::string::npos);
}

TEST_CASE("a hung worker: the job's timeline names the rank the all-reduce waits for", "[cluster][jobs]") {
  ClusterFixture c;
  auto up = c.up("--nodes 1 --cpus 2");
  const DashboardUrl url = dashboard_url(up.out);
  // Rank 1 of a user's trainer sleeps 15 s at its 300th step (tests/jobs/fixtures/flaky_trainer.cc);
  // rank 0 waits for it in the all-reduce. No progress timeout: the supervisor lets it be.
  auto submitted = c.troupe("submit --lib " + std::string(TROUPE_FLAKY_TRAINER) + " --trainer flaky --strategy sync "
                            "--workers 2 --epochs 1 --batch-size 64 --progress-timeout 0 --trainer-arg marker=" +
                            c.home() + "/hung --trainer-arg throw_at=300 --trainer-arg throw_rank=1 "
                            "--trainer-arg hang_ms=15000 --detach", 120);
  INFO(submitted.both() << c.logs_tail());
  REQUIRE(submitted.exit_code == 0);
  const std::string job = submitted.last_line();
  Json stuck;
  poll_until([&] {
    try {
      stuck = get_json(url, "/api/jobs/" + job + "/timeline?steps=10").at("stuck");
    } catch (const std::exception&) {
      return false;
    }
    return !stuck.is_null();
  }, std::chrono::seconds(60), std::chrono::milliseconds(250));
  INFO(stuck.dump());
  REQUIRE_FALSE(stuck.is_null());
  CHECK(stuck.at("rank") == 1);
  CHECK(stuck.at("waiting_ranks") == Json::array({0}));
  CHECK(stuck.at("message").get<std::string>().find("for rank 1") != std::string::npos);
  // The sleeper wakes and the job completes.
  REQUIRE(poll_until([&] {
    Json view = c.try_status(5);
    if (view.is_null()) return false;
    for (const Json& j : view.at("jobs")) if (j.at("id") == job) return j.at("state") == "SUCCEEDED";
    return false;
  }, std::chrono::seconds(180)));
}
