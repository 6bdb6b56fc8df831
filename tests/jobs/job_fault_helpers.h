// What the fault tests on a real local cluster share (tests/jobs/job_fault_cluster_test.cc,
// job_outage_cluster_test.cc): waiting for a job's step or end through `troupe status --json`,
// the job's events, the node hosting its actors, the accuracy of the same job without the fault,
// and the checks every faulted job must pass (SUCCEEDED, within half a point, accounted exactly once).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/cluster/cluster_fixture.h"

namespace troupe::testing {

inline Json job_of(const Json& view, const std::string& id) {
  for (const Json& j : view.at("jobs")) if (j.at("id") == id) return j;
  return Json();
}

// The job's view once it ended (SUCCEEDED, FAILED, CANCELLED), within `limit`.
inline Json wait_for_end(ClusterFixture& c, const std::string& id, std::chrono::seconds limit) {
  Json last;
  poll_until([&] {
    Json view = c.try_status(300);
    if (view.is_null()) return false;
    last = view;
    const std::string state = job_of(view, id).value("state", "");
    return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
  }, limit);
  return last;
}

// Waits until the job reports at least `step` steps; returns the view then.
inline Json wait_for_step(ClusterFixture& c, const std::string& id, int64_t step) {
  Json last;
  poll_until([&] {
    Json view = c.try_status(5);
    if (view.is_null()) return false;
    last = view;
    Json j = job_of(view, id);
    return !j.is_null() && j.value("step", int64_t{0}) >= step;
  }, std::chrono::seconds(240), std::chrono::milliseconds(50));
  return last;
}

// Every event of `kind` about the job, oldest first.
inline std::vector<std::string> event_messages(const Json& view, const std::string& kind, const std::string& job) {
  std::vector<std::string> out;
  for (const Json& e : view.at("events"))
    if (e.at("kind") == kind && e.value("subject", "") == job) out.insert(out.begin(), e.at("message").get<std::string>());
  return out;
}

// The first event of `kind` about the job, or null.
inline Json event_of(const Json& view, const std::string& kind, const std::string& job) {
  for (const Json& e : view.at("events")) {
    if (e.at("kind") == kind && e.value("subject", "") == job) return e;
  }
  return Json();
}

// The job's view once it wrote a checkpoint and is at step >= 1000, 30-90 steps past a multiple of
// 100 (its --checkpoint-every): a server killed then has lost pushes to be replayed.
inline Json between_checkpoints(ClusterFixture& c, const std::string& id) {
  Json view;
  REQUIRE(poll_until([&] {
    view = c.try_status(300);
    const int64_t step = view.is_null() ? 0 : job_of(view, id).value("step", int64_t{0});
    return !view.is_null() && !event_of(view, "checkpoint_written", id).is_null() && step >= 1000 &&
           step % 100 >= 30 && step % 100 < 90;
  }, std::chrono::seconds(300), std::chrono::milliseconds(50)));
  return view;
}

inline std::string submit_detached(ClusterFixture& c, const std::string& args) {
  auto r = c.troupe("submit " + args + " --detach", 120);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  return r.last_line();
}

// A node process (not the head) hosting an ALIVE actor of the job: its id and pid ("", 0: none).
inline std::pair<std::string, pid_t> node_hosting(const Json& view, const std::string& job) {
  std::pair<std::string, pid_t> out{"", 0};
  for (const Json& a : view.at("actors")) {
    if (a.value("job", "") != job || a.at("state") != "ALIVE") continue;
    for (const Json& n : view.at("nodes"))
      if (n.at("id") == a.at("node") && !n.value("is_head", false)) out = {n.at("id"), n.at("pid").get<pid_t>()};
  }
  return out;
}

// The test accuracy of the job without the fault, run to its end first.
inline double fault_free_accuracy(ClusterFixture& c, const std::string& job_args) {
  auto base = c.troupe("submit " + job_args + " --json --no-progress", 180);
  INFO(base.both() << c.logs_tail());
  REQUIRE(base.exit_code == 0);
  return Json::parse(base.last_line()).at("test_accuracy").get<double>();
}

// Within half a point: at most 50 of Fashion-MNIST's 10,000 test images apart. Counted in images,
// as a difference of exactly 50 (0.8905 vs 0.8855) is not <= 0.005 in doubles.
inline bool within_half_point(double acc, double baseline) {
  return std::llround(std::fabs(acc - baseline) * 10000) <= 50;
}

inline double accuracy_of(const Json& view, const std::string& id) {
  Json j = job_of(view, id);
  REQUIRE_FALSE(j.is_null());
  return j.at("result").at("test_accuracy").get<double>();
}

// What every faulted job must show: SUCCEEDED, restarted once, trained again, accuracy within half
// a point of the job without the fault, and (sync) every shard of every epoch trained exactly once.
// The supervisor's accounting of the job once it has one (as its workers are done, just after
// SUCCEEDED): its data_accounted or data_accounting_failed event, or null after 30 s.
inline Json accounting_of(ClusterFixture& c, const std::string& id) {
  Json found;
  poll_until([&] {
    Json now = c.try_status(300);
    if (now.is_null()) return false;
    found = event_of(now, "data_accounted", id);
    if (found.is_null()) found = event_of(now, "data_accounting_failed", id);
    return !found.is_null();
  }, std::chrono::seconds(30));
  return found;
}

// The accounting, which must say exactly once.
inline Json accounted_event(ClusterFixture& c, const std::string& id) {
  Json accounting = accounting_of(c, id);
  INFO(accounting.dump());
  REQUIRE_FALSE(accounting.is_null());
  REQUIRE(accounting.at("kind") == "data_accounted");
  CHECK(accounting.at("message").get<std::string>().find("trained exactly once") != std::string::npos);
  return accounting;
}

inline void check_recovered(ClusterFixture& c, const Json& view, const std::string& id, double baseline, bool accounted) {
  Json j = job_of(view, id);
  INFO(j.dump(1));
  REQUIRE(j.at("state") == "SUCCEEDED");
  const double acc = accuracy_of(view, id);
  CHECK(within_half_point(acc, baseline));
  Json restarting = event_of(view, "job_restarting", id);
  REQUIRE_FALSE(restarting.is_null());
  CHECK(restarting.at("message").get<std::string>().find("(restart 1 of 3)") != std::string::npos);
  CHECK_FALSE(event_of(view, "job_restarted", id).is_null());
  int restarted = 0;  // the new attempt's actors count their slot's restart
  for (const Json& a : view.at("actors")) restarted += a.value("job", "") == id && a.value("restarts", 0) == 1;
  CHECK(restarted >= 1);
  if (!accounted) return;
  CHECK_FALSE(event_of(view, "shards_moved", id).is_null());
  CHECK_FALSE(event_of(view, "job_resumed", id).is_null());
  Json accounting = accounted_event(c, id);
  CHECK(accounting.at("message").get<std::string>().find("2 attempts") != std::string::npos);
}

// A node process (not the head) hosting both an ALIVE worker and an ALIVE parameter server of the
// job: its id and pid ("", 0: none).
inline std::pair<std::string, pid_t> node_with_worker_and_server(const Json& view, const std::string& job) {
  std::map<std::string, std::set<std::string>> types;  // node -> actor types of the job there
  for (const Json& a : view.at("actors"))
    if (a.value("job", "") == job && a.at("state") == "ALIVE") types[a.at("node")].insert(a.at("type"));
  for (const Json& n : view.at("nodes")) {
    auto it = types.find(n.at("id"));
    if (it != types.end() && !n.value("is_head", false) && it->second.count("troupe.ps") && it->second.count("troupe.worker"))
      return {n.at("id"), n.at("pid").get<pid_t>()};
  }
  return {"", 0};
}

// A node process (not the head) hosting an ALIVE worker of the job but not its parameter server:
// its id and pid ("", 0: none).
inline std::pair<std::string, pid_t> worker_node_without_server(const Json& view, const std::string& job) {
  std::string victim, server_node;
  for (const Json& a : view.at("actors"))
    if (a.value("job", "") == job && a.at("state") == "ALIVE" && a.at("type") == "troupe.ps") server_node = a.at("node");
  for (const Json& a : view.at("actors")) {
    if (a.value("job", "") != job || a.at("state") != "ALIVE" || a.at("type") != "troupe.worker") continue;
    for (const Json& n : view.at("nodes"))
      if (n.at("id") == a.at("node") && !n.value("is_head", false) && n.at("id") != server_node) victim = n.at("id");
  }
  for (const Json& n : view.at("nodes"))
    if (!victim.empty() && n.at("id") == victim) return {victim, n.at("pid").get<pid_t>()};
  return {"", 0};
}

// Joins a node of 2 cpus to `c`'s cluster from a session of its own (as another machine would).
inline void join_node(ClusterFixture& c, ClusterFixture& joiner) {
  const Json info = c.cluster_file();
  auto join = joiner.troupe("up --address " + info.at("head_address").get<std::string>() + " --token " +
                            info.at("token").get<std::string>() + " --cpus 2 --timeout 30", 60);
  INFO(join.both() << c.logs_tail() << joiner.logs_tail());
  REQUIRE(join.exit_code == 0);
}

}  // namespace troupe::testing
