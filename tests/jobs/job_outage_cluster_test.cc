// The cluster outlives its GCS and its head (issue 27), on a real local cluster, nothing restarted
// by the test: the embedded redis-server SIGKILLed mid-job (the head's watchdog starts it again)
// under an async and a pipeline job (the sync job's case is in job_fault_cluster_test.cc); an
// external redis-server (not watched: nobody restarts it) frozen for 30 s, then the head frozen for
// 30 s, under a sync job. Every time: no node process exits, the job completes, its data is
// accounted exactly once, and no restart of the job is spent on the outage (workers and nodes
// wait it out: the setting outage_grace_ms, 60 s). And the GCS killed with its data directory
// deleted: the cluster's tables are whole again within seconds, a sync job with checkpoints resumes
// from the mirrors in its checkpoint directory (one restart, accounted exactly once), and a job
// without checkpoints fails naming the loss.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"

using namespace troupe::testing;

namespace {

// Every process of the session alive now (role -> pid), but the redis-server.
std::map<std::string, pid_t> live_processes(ClusterFixture& c) {
  std::map<std::string, pid_t> out;
  for (const auto& [role, pid] : c.session_pids())
    if (role != "redis" && !process_gone(pid)) out[role] = pid;
  return out;
}

void check_none_exited(const std::map<std::string, pid_t>& before) {
  for (const auto& [role, pid] : before) {
    INFO(role << " (pid " << pid << ") exited during the outage");
    CHECK(!process_gone(pid));
  }
}

// The job ended SUCCEEDED, without a restart, accounted exactly once.
void check_rode_out(ClusterFixture& c, const Json& end, const std::string& id) {
  Json j = job_of(end, id);
  INFO(j.dump(1) << c.logs_tail());
  REQUIRE(j.at("state") == "SUCCEEDED");
  Json spent = event_of(end, "job_restarting", id);
  INFO("restart: " << spent.dump());
  CHECK(spent.is_null());
  accounted_event(c, id);
}

}  // namespace

TEST_CASE("outages: the embedded GCS killed mid-job is started again by the head and async and pipeline jobs ride "
          "it out", "[jobs][cluster][faults][outage]") {
  struct Case {
    std::string name, args;
    int64_t kill_at_step;
  };
  const Case cases[] = {
      {"async", "--strategy async --workers 2 --ps 2 --epochs 4 --batch-size 64 --checkpoint-every 100", 1200},
      {"pipeline", "--strategy pipeline --stages 2 --microbatches 2 --epochs 3 --batch-size 128 --checkpoint-every 100",
       500},
  };
  for (const Case& k : cases) {
    SECTION(k.name) {
      ClusterFixture c;
      c.up("--nodes 2 --cpus 2");
      const std::string job_args = k.args + " --checkpoint-dir " + c.home() + "/ckpt";
      const double baseline = fault_free_accuracy(c, job_args);
      const std::string id = submit_detached(c, job_args);
      wait_for_step(c, id, k.kill_at_step);
      const auto before = live_processes(c);
      const pid_t redis_pid = c.pid_of("redis");
      REQUIRE(redis_pid > 0);
      REQUIRE(::kill(redis_pid, SIGKILL) == 0);
      REQUIRE(poll_until([&] { return process_gone(redis_pid); }, std::chrono::seconds(10)));
      REQUIRE(c.restarted_gcs(redis_pid) > 0);  // by the head's watchdog, not by the test

      Json end = wait_for_end(c, id, std::chrono::seconds(240));
      check_rode_out(c, end, id);
      check_none_exited(before);
      CHECK(within_half_point(accuracy_of(end, id), baseline));
      WARN(k.name << ": GCS killed at step >= " << k.kill_at_step << ", accuracy " << accuracy_of(end, id)
                  << " vs " << baseline << " without the fault");
    }
  }
}

TEST_CASE("outages: an external GCS frozen for 30 s, then the head frozen for 30 s: no node exits and the sync job "
          "completes without a restart", "[jobs][cluster][faults][outage]") {
  ClusterFixture c;
  // An external redis-server, as `up --redis` users run it: the head does not watch it, so a
  // freeze lasts as long as it lasts.
  pid_t redis_pid = 0;
  const int port = c.start_external_redis("ext-secret", "--save '' --appendonly yes --appendfsync always", &redis_pid);
  c.up("--nodes 2 --cpus 2 --redis 127.0.0.1:" + std::to_string(port) + " --redis-password ext-secret");

  const std::string id = submit_detached(c, "--strategy sync --workers 4 --epochs 10 --batch-size 128 "
                                            "--checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt");
  wait_for_step(c, id, 500);
  const auto before = live_processes(c);

  // 1. The GCS frozen for 30 s (longer than every GCS client's own deadline; shorter than
  //    outage_grace_ms). The length of the outage is the scenario, not a synchronisation.
  REQUIRE(::kill(redis_pid, SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::seconds(30));
  check_none_exited(before);  // still there at the end of it
  REQUIRE(::kill(redis_pid, SIGCONT) == 0);
  Json view = wait_for_step(c, id, 1500);
  for (const Json& n : view.at("nodes")) {
    INFO("node " << n.dump());
    CHECK(n.at("state") == "ALIVE");
  }

  // 2. The head frozen for 30 s (its workers with it): the nodes keep their actors and heartbeat
  //    on; the head, back, suspects nobody for its own silence.
  const pid_t head_pid = c.pid_of("head");
  REQUIRE(head_pid > 0);
  REQUIRE(::kill(head_pid, SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::seconds(30));
  check_none_exited(before);
  REQUIRE(::kill(head_pid, SIGCONT) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(240));
  check_rode_out(c, end, id);
  check_none_exited(before);
  for (const Json& n : end.at("nodes")) {
    INFO("node " << n.dump());
    CHECK(n.at("state") == "ALIVE");
  }
  for (const Json& e : end.at("events")) {
    INFO("event " << e.dump());
    CHECK(e.at("kind") != "node_died");
  }
  CHECK(accuracy_of(end, id) >= 0.885);
}

TEST_CASE("outages: the GCS killed with its data directory deleted comes back empty: the head writes back the "
          "nodes and actors within seconds, a sync job with checkpoints resumes from its checkpoint on disk and is "
          "accounted exactly once, one without fails naming the loss", "[jobs][cluster][faults][outage]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");
  auto spawned = c.troupe("spawn counter --count 5 --json", 60);
  INFO(spawned.both());
  REQUIRE(spawned.exit_code == 0);
  // 3 epochs of 468 steps: the loss comes in epoch 2 (or 3), so finished epochs of the ledger must
  // come back too, and with room to spare before the end (the job trains ~100 steps a second here).
  const std::string resumable = "--strategy sync --workers 2 --epochs 3 --batch-size 128 --checkpoint-every 100 "
                                "--checkpoint-dir " + c.home() + "/ckpt";
  const double baseline = fault_free_accuracy(c, resumable);
  const std::string id = submit_detached(c, resumable);
  const std::string plain = submit_detached(c, "--strategy sync --workers 2 --epochs 10 --batch-size 128");
  REQUIRE(job_of(wait_for_step(c, plain, 100), plain).value("step", int64_t{0}) >= 100);
  Json view = wait_for_step(c, id, 560);
  REQUIRE(job_of(view, id).value("step", int64_t{0}) >= 560);  // past its checkpoint of step 500
  std::set<std::string> counters;
  for (const Json& a : view.at("actors"))
    if (a.at("type") == "counter" && a.at("state") == "ALIVE") counters.insert(a.at("id").get<std::string>());
  REQUIRE(counters.size() == 5u);
  REQUIRE(view.at("nodes").size() == 3u);
  const auto before = live_processes(c);

  // Its data directory gone (a disk replaced, a volume not mounted), then the server killed: the
  // head's watchdog starts it again, on an empty directory.
  const pid_t redis_pid = c.pid_of("redis");
  REQUIRE(redis_pid > 0);
  std::filesystem::remove_all(c.session_dir() + "/redis");
  const auto killed = Clock::now();
  REQUIRE(::kill(redis_pid, SIGKILL) == 0);
  REQUIRE(c.restarted_gcs(redis_pid) > 0);

  // Within seconds: every node ALIVE and every live actor ALIVE again in the GCS, the loss on
  // record, the job without checkpoints FAILED saying why (its ledger and progress are gone: it
  // must not train on) and the one with checkpoints written back from disk and restarting.
  Json after;
  const bool whole = poll_until([&] {
    after = c.try_status(100);
    if (after.is_null()) return false;
    int alive_nodes = 0, alive_counters = 0;
    for (const Json& n : after.at("nodes")) alive_nodes += n.at("state") == "ALIVE";
    for (const Json& a : after.at("actors"))
      alive_counters += counters.count(a.at("id").get<std::string>()) && a.at("state") == "ALIVE";
    return alive_nodes == 3 && alive_counters == 5 && !event_of(after, "gcs_data_lost", "").is_null() &&
           job_of(after, plain).value("state", "") == "FAILED" && !event_of(after, "job_restarting", id).is_null();
  }, std::chrono::seconds(30), std::chrono::milliseconds(200));
  INFO(after.dump(1).substr(0, 6000) << c.logs_tail());
  REQUIRE(whole);
  WARN("the GCS came back empty: nodes, actors, one job's failure and the other's restart on record "
       << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count() << " ms after the kill");
  const std::string failed = job_of(after, plain).at("message");
  CHECK(failed.find("the GCS lost its data while the job ran") != std::string::npos);
  CHECK(failed.find("it wrote no checkpoints to resume from") != std::string::npos);
  CHECK_FALSE(event_of(after, "gcs_refilled", "").is_null());
  // Its checkpoints written back, the step and the loss named. The one restart is the supervisor's
  // for the loss, or (when a worker met the empty ledger first and exited, "shard 0 of epoch 2 ...
  // is not in the GCS") that worker's failure: the restart then under way finds the checkpoints.
  const Json restored = event_of(after, "checkpoints_restored", id);
  INFO("restored: " << restored.dump());
  REQUIRE_FALSE(restored.is_null());
  const std::string restored_text = restored.at("message");
  CHECK(restored_text.find(c.home() + "/ckpt/" + id) != std::string::npos);
  CHECK(restored_text.find("after the GCS lost its data") != std::string::npos);
  CHECK(restored_text.find("(newest: step ") != std::string::npos);
  const std::string restarting = event_of(after, "job_restarting", id).at("message");
  INFO("restarting: " << restarting);
  CHECK((restarting.find("the GCS lost its data while the job ran") != std::string::npos ||
         restarting.find("is not in the GCS") != std::string::npos));
  check_none_exited(before);
  // The failed job's workers were stopped (not left training on an empty ledger).
  CHECK(poll_until([&] {
    Json now = c.try_status(10);
    if (now.is_null()) return false;
    for (const Json& a : now.at("actors"))
      if (a.value("job", "") == plain && a.at("state") == "ALIVE") return false;
    return true;
  }, std::chrono::seconds(30), std::chrono::milliseconds(200)));

  // The resumed job trains to its end from the checkpoint: one restart, the same accuracy, every
  // shard of every epoch trained exactly once over its two attempts (epoch 1's ledger and the
  // ranges up to the checkpoint came back from disk).
  Json end = wait_for_end(c, id, std::chrono::seconds(300));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, true);
  const Json resumed = job_of(end, id).at("result");
  INFO(resumed.dump());
  CHECK(resumed.at("resumed_from").at("step").get<int64_t>() >= 500);
  WARN("resumed after the GCS lost its data from step " << resumed.at("resumed_from").at("step") << ": accuracy "
                                                       << accuracy_of(end, id) << " vs " << baseline);
  check_none_exited(before);

  // The cluster is whole: a new job trains to its end, and the counters still answer.
  auto again = c.troupe("submit --strategy sync --workers 2 --epochs 1 --batch-size 128 --json --no-progress", 180);
  INFO(again.both() << c.logs_tail());
  REQUIRE(again.exit_code == 0);
  CHECK(Json::parse(again.last_line()).at("test_accuracy").get<double>() > 0.8);
  std::string ids;
  for (const std::string& a : counters) ids += " " + a;
  auto call = c.troupe("call" + ids + " --method get --json", 30);
  INFO(call.both());
  REQUIRE(call.exit_code == 0);
  CHECK(Json::parse(call.last_line()).at("answered") == 5);
}
