// The head process killed with SIGKILL mid-job and started again (`troupe up --restart-head`) on a
// real local cluster: the nodes register again with their ids (their actors never stopped), the
// new head finds the running job in the GCS and supervises it again — shown by killing a worker node
// afterwards, which the new head handles like its predecessor would (a restart from the newest
// checkpoint) — and the job completes with its data accounted exactly once.
#include <catch2/catch.hpp>

#include <csignal>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

namespace {

Json job_in(const Json& view, const std::string& id) {
  for (const Json& j : view.at("jobs")) if (j.at("id") == id) return j;
  return Json();
}

Json event_in(const Json& view, const std::string& kind, const std::string& subject) {
  for (const Json& e : view.at("events"))
    if (e.at("kind") == kind && e.value("subject", "") == subject) return e;
  return Json();
}

// Polls `troupe status` until `done(view)` or the deadline; returns the last view.
template <typename Done>
Json status_until(ClusterFixture& c, Done done, std::chrono::seconds limit) {
  Json last;
  poll_until([&] {
    Json view = c.try_status(300);
    if (view.is_null()) return false;
    last = view;
    return done(view);
  }, limit, std::chrono::milliseconds(100));
  return last;
}

// Waits for job `id` to end within `limit`; requires SUCCEEDED with a trained model's accuracy, and
// returns the last view.
Json expect_succeeded(ClusterFixture& c, const std::string& id, std::chrono::seconds limit) {
  Json end = status_until(c, [&](const Json& v) {
    const std::string state = job_in(v, id).value("state", "");
    return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
  }, limit);
  Json j = job_in(end, id);
  INFO(j.dump(1) << c.logs_tail());
  REQUIRE(j.at("state") == "SUCCEEDED");
  CHECK(j.at("result").at("test_accuracy").get<double>() > 0.85);
  return end;
}

}  // namespace

TEST_CASE("faults: the head killed and restarted: nodes register again and the running job is supervised again",
          "[jobs][cluster][faults][head]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");
  Json view = c.status();
  std::string head_node;
  std::set<std::string> worker_nodes;
  for (const Json& n : view.at("nodes")) {
    if (n.value("is_head", false)) head_node = n.at("id");
    else worker_nodes.insert(n.at("id").get<std::string>());
  }
  REQUIRE_FALSE(head_node.empty());
  REQUIRE(worker_nodes.size() == 2u);
  // The head's own cpus are taken, so the job's workers run on the two nodes (which outlive the head).
  auto filler = c.troupe("spawn echo --cpus 2 --node " + head_node);
  INFO(filler.both());
  REQUIRE(filler.exit_code == 0);
  const std::string ckpt = c.home() + "/ckpt";
  auto sub = c.troupe("submit --strategy sync --workers 2 --cpus-per-worker 2 --epochs 20 --batch-size 128 "
                      "--checkpoint-every 100 --checkpoint-dir " + ckpt + " --detach --no-progress", 120);
  INFO(sub.both() << c.logs_tail());
  REQUIRE(sub.exit_code == 0);
  const std::string id = sub.last_line();
  status_until(c, [&](const Json& v) { return job_in(v, id).value("step", int64_t{0}) >= 300; }, std::chrono::seconds(120));

  const pid_t head_pid = c.pid_of("head");
  REQUIRE(head_pid > 0);
  const int64_t killed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(::kill(head_pid, SIGKILL) == 0);
  REQUIRE(poll_until([&] { return process_gone(head_pid); }, std::chrono::seconds(10)));
  auto restarted = c.troupe("up --restart-head --cpus 2", 60);
  INFO(restarted.both() << c.logs_tail());
  REQUIRE(restarted.exit_code == 0);
  CHECK(restarted.out.find("head restarted at " + c.cluster_file().at("head_address").get<std::string>()) !=
        std::string::npos);

  // The nodes are ALIVE under the new head with their ids; the old head's node is DEAD; the job,
  // whose workers never stopped, is adopted with both of them alive and keeps training.
  Json after = status_until(c, [&](const Json& v) {
    int alive = 0;
    bool old_head_dead = false;
    for (const Json& n : v.at("nodes")) {
      alive += worker_nodes.count(n.at("id").get<std::string>()) && n.at("state") == "ALIVE";
      old_head_dead = old_head_dead || (n.at("id") == head_node && n.at("state") == "DEAD");
    }
    return alive == 2 && old_head_dead && !event_in(v, "job_adopted", id).is_null();
  }, std::chrono::seconds(30));
  INFO(after.dump(1).substr(0, 4000) << c.logs_tail());
  for (const Json& n : after.at("nodes")) {
    if (worker_nodes.count(n.at("id").get<std::string>())) CHECK(n.at("state") == "ALIVE");
    if (n.at("id") == head_node) CHECK(n.at("state") == "DEAD");
  }
  Json adopted = event_in(after, "job_adopted", id);
  REQUIRE_FALSE(adopted.is_null());
  WARN("head SIGKILLed; the job was adopted by the restarted head " << adopted.value("time_ms", int64_t{0}) - killed_ms
                                                                   << " ms after the kill (the restart included)");
  CHECK(adopted.at("message").get<std::string>().find("2 of 2 actors alive") != std::string::npos);
  const int64_t step_then = job_in(after, id).value("step", int64_t{0});
  Json moving = status_until(c, [&](const Json& v) { return job_in(v, id).value("step", int64_t{0}) > step_then + 50; },
                             std::chrono::seconds(60));
  CHECK(job_in(moving, id).value("step", int64_t{0}) > step_then + 50);
  CHECK(event_in(moving, "job_restarting", id).is_null());  // nothing was restarted for the head
  REQUIRE(job_in(moving, id).at("state") == "RUNNING");     // (20 epochs: far from done yet)

  // The new head supervises it: a worker node killed now is handled — restarted from its checkpoint
  // on the nodes left (the new head's and the other node's cpus).
  pid_t victim = 0;
  for (const Json& n : moving.at("nodes"))
    if (n.at("id") == *worker_nodes.begin()) victim = n.at("pid").get<pid_t>();
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  Json end = expect_succeeded(c, id, std::chrono::seconds(300));
  Json restarting = event_in(end, "job_restarting", id);
  REQUIRE_FALSE(restarting.is_null());
  // Its cause is whichever the new head heard first: the node's loss, or the other worker's
  // all-reduce failing on it. Either way it is one restart.
  CHECK(restarting.at("message").get<std::string>().find("(restart 1 of 3)") != std::string::npos);
  CHECK_FALSE(event_in(end, "job_restarted", id).is_null());
  Json accounted = status_until(c, [&](const Json& v) { return !event_in(v, "data_accounted", id).is_null(); },
                                std::chrono::seconds(30));
  REQUIRE_FALSE(event_in(accounted, "data_accounted", id).is_null());
  CHECK(event_in(accounted, "data_accounted", id).at("message").get<std::string>().find("exactly once") !=
        std::string::npos);
}

// The head and one of the job's worker nodes killed together: the restarted head (offering what
// its predecessor offered, no --cpus given) finds a worker lost, restarts the job
// from its checkpoint on the nodes that are connected — never on the dead node, which is not yet
// declared DEAD when the restart is placed — and the job completes, accounted exactly once.
TEST_CASE("faults: the head and a worker node killed together: the restarted head restarts the job on the nodes "
          "alive", "[jobs][cluster][faults][head]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");
  Json view = c.status();
  std::string head_node;
  std::map<std::string, pid_t> worker_nodes;
  for (const Json& n : view.at("nodes")) {
    if (n.value("is_head", false)) head_node = n.at("id");
    else worker_nodes[n.at("id").get<std::string>()] = n.at("pid").get<pid_t>();
  }
  REQUIRE(worker_nodes.size() == 2u);
  auto filler = c.troupe("spawn echo --cpus 2 --node " + head_node);  // the workers go to the two nodes
  REQUIRE(filler.exit_code == 0);
  auto sub = c.troupe("submit --strategy sync --workers 2 --cpus-per-worker 2 --epochs 4 --batch-size 128 "
                      "--checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt --detach --no-progress", 120);
  INFO(sub.both() << c.logs_tail());
  REQUIRE(sub.exit_code == 0);
  const std::string id = sub.last_line();
  status_until(c, [&](const Json& v) { return job_in(v, id).value("step", int64_t{0}) >= 300; }, std::chrono::seconds(120));

  const std::string dead_node = worker_nodes.begin()->first;
  const pid_t head_pid = c.pid_of("head");
  REQUIRE(head_pid > 0);
  const int64_t killed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(::kill(worker_nodes.begin()->second, SIGKILL) == 0);
  REQUIRE(::kill(head_pid, SIGKILL) == 0);
  REQUIRE(poll_until([&] { return process_gone(head_pid); }, std::chrono::seconds(10)));
  auto restarted = c.troupe("up --restart-head", 60);
  INFO(restarted.both() << c.logs_tail());
  REQUIRE(restarted.exit_code == 0);

  Json end = expect_succeeded(c, id, std::chrono::seconds(240));
  Json adopted = event_in(end, "job_adopted", id);
  REQUIRE_FALSE(adopted.is_null());
  INFO(adopted.dump());
  // The live worker may have died on its own by then (its all-reduce failing on the dead peer).
  CHECK(adopted.at("message").get<std::string>().find("2 of 2 actors alive") == std::string::npos);
  for (const Json& n : end.at("nodes")) {
    if (n.value("is_head", false) && n.at("state") == "ALIVE") CHECK(n.at("resources").at("total").at("cpus") == 2);
  }
  for (const Json& e : end.at("events")) {  // nothing was started on the dead node
    if (e.at("kind") == "actor_started" && e.value("time_ms", int64_t{0}) > killed_ms)
      CHECK(e.value("subject", "") != dead_node);
  }
  Json accounted = status_until(c, [&](const Json& v) { return !event_in(v, "data_accounted", id).is_null(); },
                                std::chrono::seconds(30));
  REQUIRE_FALSE(event_in(accounted, "data_accounted", id).is_null());
  CHECK(event_in(accounted, "data_accounted", id).at("message").get<std::string>().find("exactly once") !=
        std::string::npos);
}

// A `troupe spawn` actor alive when the head died: the restarted head watches it again, so when it
// is stopped its node's cpus are free again — another actor needing them starts there.
TEST_CASE("faults: the head restarted watches the spawned actors it finds alive: a stopped one frees its cpus",
          "[cluster][faults][head]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");
  std::string node;
  const Json view = c.status();
  for (const Json& n : view.at("nodes"))
    if (!n.value("is_head", false)) node = n.at("id").get<std::string>();
  INFO(view.dump(1));
  REQUIRE_FALSE(node.empty());
  auto spawned = c.troupe("spawn echo --cpus 2 --json --node " + node);
  INFO(spawned.both());
  REQUIRE(spawned.exit_code == 0);
  const std::string actor = Json::parse(spawned.last_line()).at("actor_ids").at(0);
  auto waiting = c.troupe("spawn echo --cpus 64 --json");  // fits nowhere: PENDING
  INFO(waiting.both());
  REQUIRE(waiting.exit_code == 0);
  REQUIRE(Json::parse(waiting.last_line()).at("started") == 0);
  const std::string pending = Json::parse(waiting.last_line()).at("actor_ids").at(0);

  c.kill_and_restart_head("--cpus 2");
  auto used_cpus = [&](const Json& v) {
    for (const Json& n : v.at("nodes"))
      if (n.at("id") == node && n.at("state") == "ALIVE") return n.at("resources").at("used").at("cpus").get<double>();
    return -1.0;
  };
  Json back = status_until(c, [&](const Json& v) { return used_cpus(v) == 2.0; }, std::chrono::seconds(30));
  REQUIRE(used_cpus(back) == 2.0);  // the new head counts the actor it found
  // The one the old head was still trying to place cannot be placed by the new one: DEAD, saying so.
  Json left;
  const Json now = c.status(0);
  for (const Json& a : now.at("actors"))
    if (a.at("id") == pending) left = a;
  INFO(left.dump());
  REQUIRE_FALSE(left.is_null());
  CHECK(left.at("state") == "DEAD");
  CHECK(left.at("death_reason").get<std::string>().find("never placed: the head that was placing it stopped") !=
        std::string::npos);
  CHECK(left.at("death_reason").get<std::string>().find("spawn it again") != std::string::npos);

  auto stop = c.troupe("stop " + actor);
  INFO(stop.both() << c.logs_tail());
  REQUIRE(stop.exit_code == 0);
  Json freed = status_until(c, [&](const Json& v) { return used_cpus(v) == 0.0; }, std::chrono::seconds(30));
  CHECK(used_cpus(freed) == 0.0);
  auto again = c.troupe("spawn echo --cpus 2 --json --node " + node);
  INFO(again.both());
  REQUIRE(again.exit_code == 0);
  CHECK(Json::parse(again.last_line()).at("started") == 1);
}

// The head and its embedded GCS killed together (a machine's OOM killer taking both): nobody
// watches the GCS while the head is gone, so `up --restart-head` starts it again from its
// append-only file before the head; the nodes kept their actors meanwhile (outage_grace_ms), the
// job's workers waited out the GCS, and the new head adopts the job untouched: no restart spent.
TEST_CASE("faults: the head and its GCS killed together: up --restart-head starts both, and the job goes on "
          "untouched", "[jobs][cluster][faults][head][outage]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");
  std::string head_node;
  std::set<std::string> worker_nodes;
  std::map<std::string, pid_t> node_pids;
  const Json first = c.status();
  for (const Json& n : first.at("nodes")) {
    if (n.value("is_head", false)) {
      head_node = n.at("id");
    } else {
      worker_nodes.insert(n.at("id").get<std::string>());
      node_pids[n.at("id")] = n.at("pid").get<pid_t>();
    }
  }
  REQUIRE_FALSE(head_node.empty());
  auto filler = c.troupe("spawn echo --cpus 2 --node " + head_node);  // the workers go to the nodes
  INFO(filler.both());
  REQUIRE(filler.exit_code == 0);
  auto sub = c.troupe("submit --strategy sync --workers 2 --cpus-per-worker 2 --epochs 8 --batch-size 128 "
                      "--checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt --detach --no-progress", 120);
  INFO(sub.both() << c.logs_tail());
  REQUIRE(sub.exit_code == 0);
  const std::string id = sub.last_line();
  status_until(c, [&](const Json& v) { return job_in(v, id).value("step", int64_t{0}) >= 300; }, std::chrono::seconds(120));

  const pid_t head_pid = c.pid_of("head");
  const pid_t redis_pid = c.pid_of("redis");
  REQUIRE(head_pid > 0);
  REQUIRE(redis_pid > 0);
  REQUIRE(::kill(head_pid, SIGKILL) == 0);
  REQUIRE(::kill(redis_pid, SIGKILL) == 0);
  REQUIRE(poll_until([&] { return process_gone(head_pid) && process_gone(redis_pid); }, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a person noticing: the scenario, not a wait for anything
  CHECK(c.try_status().is_null());  // no GCS: status says so rather than showing stale state
  auto restarted = c.troupe("up --restart-head --cpus 2", 60);
  INFO(restarted.both() << c.logs_tail());
  REQUIRE(restarted.exit_code == 0);
  CHECK(restarted.out.find("the embedded redis-server was not running: started it again") != std::string::npos);
  const pid_t new_redis = c.pid_of("redis");
  c.track(new_redis);
  CHECK(new_redis != redis_pid);
  CHECK_FALSE(process_gone(new_redis));

  Json end = expect_succeeded(c, id, std::chrono::seconds(300));
  for (const auto& [node, pid] : node_pids) {
    INFO("node " << node << " (pid " << pid << ") exited while the head and the GCS were away");
    CHECK_FALSE(process_gone(pid));
  }
  for (const Json& n : end.at("nodes"))
    if (worker_nodes.count(n.at("id").get<std::string>())) CHECK(n.at("state") == "ALIVE");
  CHECK_FALSE(event_in(end, "job_adopted", id).is_null());
  CHECK(event_in(end, "job_restarting", id).is_null());  // the workers rode it out
  Json accounted = status_until(c, [&](const Json& v) { return !event_in(v, "data_accounted", id).is_null(); },
                                std::chrono::seconds(30));
  REQUIRE_FALSE(event_in(accounted, "data_accounted", id).is_null());
}
