// What the live-recovery cluster tests share (tests/jobs/live_recovery_cluster_test.cc and the torch
// module's, tests/models/torch/torch_job_cluster_test.cc): a job run saving its model, the checks a
// live recovery must pass once the job ended, and the fault of a node with two workers killed.
#pragma once

#include <catch2/catch.hpp>

#include <csignal>
#include <map>
#include <string>

#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"
#include "tests/support/run_command.h"

namespace troupe::testing {

// Submits `args` saving to `file` and waits for its result line; returns the job's id.
inline std::string run_saving(ClusterFixture& c, const std::string& args, const std::string& file) {
  auto r = c.troupe("submit " + args + " --save " + file + " --json --no-progress", 400);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  return Json::parse(r.last_line()).at("job_id").get<std::string>();
}

// What a live recovery must show once the job ended: SUCCEEDED; the supervisor replaced only what
// failed (restart 1 of 3, "while the others go on"); the job went on live from its workers' memory
// with at most `max_lost` completed steps lost (plain sync: none; a buddy mirror's newest round may be
// the step before, when the fault lands while that round is sent); exactly-once accounting; the saved
// model equal to `baseline_file`'s.
inline void check_live(ClusterFixture& c, const std::string& id, const std::string& file,
                       const std::string& baseline_file, int64_t max_lost) {
  Json view = c.status(400);
  Json j = job_of(view, id);
  INFO(j.dump(1) << c.logs_tail());
  REQUIRE(j.at("state") == "SUCCEEDED");
  Json restarting = event_of(view, "job_restarting", id);
  REQUIRE_FALSE(restarting.is_null());
  const std::string why = restarting.at("message").get<std::string>();
  INFO("the failure: " << why);
  CHECK(why.find("while the others go on (restart 1 of 3)") != std::string::npos);
  Json live = event_of(view, "job_recovered_live", id);
  REQUIRE_FALSE(live.is_null());
  const std::string how = live.at("message").get<std::string>();
  WARN("recovered: " << how);
  CHECK(how.find("goes on live at generation") != std::string::npos);
  CHECK_FALSE(event_of(view, "job_resumed", id).is_null());
  const Json recovery = j.at("result").at("recovery");  // the summary says how it went
  INFO(recovery.dump());
  CHECK(recovery.at("setting") == "live");
  CHECK(recovery.at("mode") == "live");
  CHECK(recovery.at("steps_lost").get<int64_t>() <= max_lost);
  CHECK(recovery.at("bytes_moved").get<int64_t>() > 0);
  CHECK(recovery.at("restarts") == 1);
  Json accounting = accounted_event(c, id);
  (void)accounting;
  // `troupe timeline` draws the recovery on the job's track.
  auto timeline = c.troupe("timeline " + id, 60);
  INFO(timeline.out.substr(0, 1500) << timeline.err);
  REQUIRE(timeline.exit_code == 0);
  int64_t drawn_lost = -1;  // the recovery slice's steps lost (-1: no slice)
  const Json trace = Json::parse(timeline.out);
  for (const Json& e : trace.at("traceEvents"))
    if (e.at("name").get<std::string>() == "recovery (live)") drawn_lost = e.at("args").at("steps_lost").get<int64_t>();
  CHECK(drawn_lost >= 0);
  CHECK(drawn_lost <= max_lost);
  const std::string saved = slurp(file), expected = slurp(baseline_file);
  REQUIRE(saved.size() > 1000);
  INFO("the recovered job's model differs from the undisturbed job's (same seed)");
  CHECK(saved == expected);
}

// A node holding two of the job's four workers SIGKILLed once the job reported step 120 (of 936:
// two epochs, so a fast job — the torch mlp trains ~150 steps a second — is still running when a
// status poll slowed by a loaded machine sees it there), on 3 nodes of 2 cpus beside a head of half
// a cpu (room for the replacements).
inline void node_killed(const std::string& extra, int64_t max_lost) {
  ClusterFixture c;
  c.up_beside_head(3, 2);
  const std::string args = "--strategy sync --workers 4 --epochs 2 --batch-size 128 --seed 7 --transport tcp "
                           "--restart-backoff 0" + extra;
  const std::string baseline = c.home() + "/undisturbed.safetensors";
  run_saving(c, args, baseline);

  const std::string file = c.home() + "/recovered.safetensors";
  const std::string id = submit_detached(c, args + " --save " + file);
  Json view = wait_for_step(c, id, 120);
  std::string victim;
  pid_t pid = 0;
  std::map<std::string, int> workers_on;
  for (const Json& a : view.at("actors"))
    if (a.value("job", "") == id && a.at("state") == "ALIVE") ++workers_on[a.at("node").get<std::string>()];
  for (const Json& n : view.at("nodes"))
    if (!n.value("is_head", false) && workers_on[n.at("id").get<std::string>()] >= 2) {
      victim = n.at("id").get<std::string>();
      pid = n.at("pid").get<pid_t>();
    }
  INFO(view.dump(1));
  REQUIRE(job_of(view, id).value("state", "") == "RUNNING");  // not over before the poll saw step 120
  REQUIRE(pid > 0);  // the spread placement put two workers on a node
  const int64_t at_step = job_of(view, id).value("step", int64_t{0});
  REQUIRE(::kill(pid, SIGKILL) == 0);
  WARN("node " << victim.substr(0, 8) << " killed once the job reported step " << at_step);
  Json end = wait_for_end(c, id, std::chrono::seconds(300));
  check_live(c, id, file, baseline, max_lost);
}

}  // namespace troupe::testing
