// Supervision on a real local cluster (actors/job_supervisor.h, trainers/job/sync_recovery.h):
// faults injected into running jobs — a node process killed with SIGKILL mid-epoch, a user's
// trainer that throws, a pipeline stage's node killed, an async parameter server's node killed —
// and each time the job completes, within half a point of the same job without the fault, with the
// data accounting proven from the GCS (gcs/data_accounting.h). An elastic sync job goes on smaller
// after its node is killed and grows back when a node joins.
// Detection and recovery times are printed for the record; docs/benchmarks.md has the figures of
// scripts/bench-recovery.sh (timing is never asserted here).
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>

#include "tests/cluster/cluster_fixture.h"
#include "tests/dashboard/dashboard_url.h"
#include "tests/jobs/job_fault_helpers.h"
#include "tests/jobs/recovery_metrics.h"
#include "tests/jobs/two_hosts.h"

using namespace troupe::testing;
namespace fs = std::filesystem;

TEST_CASE("faults: a sync job rides out its worker node killed mid-epoch and the GCS killed and restarted",
          "[jobs][cluster][faults]") {
  ClusterFixture c;
  auto up = c.up("--nodes 2 --cpus 2");  // 6 cpus on 3 processes: 4 workers, and room for them after one node dies
  const DashboardUrl url = dashboard_url(up.out);
  const std::string ckpt = c.home() + "/ckpt";
  const std::string job_args = "--strategy sync --workers 4 --epochs 10 --batch-size 128 --checkpoint-every 100 "
                               "--checkpoint-dir " + ckpt;
  const double baseline = fault_free_accuracy(c, job_args);

  const std::string id = submit_detached(c, job_args);
  Json view = wait_for_step(c, id, 1100);  // in epoch 3, past a few checkpoints
  const auto [victim, pid] = node_hosting(view, id);  // a node process (not the head) with workers of the job
  REQUIRE_FALSE(victim.empty());
  REQUIRE(pid > 0);
  const int64_t killed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(::kill(pid, SIGKILL) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(180));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, true);
  Json restarting = event_of(end, "job_restarting", id);
  CHECK(restarting.at("message").get<std::string>().find("its node " + victim.substr(0, 8) + " is gone") != std::string::npos);
  WARN("killed node " << victim.substr(0, 8) << ": restart began "
                      << restarting.value("time_ms", int64_t{0}) - killed_ms << " ms after the kill, training resumed "
                      << event_of(end, "job_resumed", id).value("time_ms", int64_t{0}) - killed_ms << " ms after it");
  // The head's /metrics has the restart's detection and resume times (for an operator's alerts).
  check_recovery_metrics(url, id);

  // The GCS itself killed mid-job (what the OOM killer does), and nobody restarts it by hand: the
  // head's watchdog starts it again on its append-only file, every process reconnects, the job goes
  // on (no restart needed) and nothing it recorded is lost (the embedded server fsyncs each write).
  const std::string id3 = submit_detached(c, job_args);
  wait_for_step(c, id3, 1100);
  std::map<std::string, pid_t> before_gcs_kill;  // the processes alive then (the killed node's is not)
  for (const auto& [role, pid] : c.session_pids())
    if (!process_gone(pid)) before_gcs_kill[role] = pid;
  const pid_t redis_pid = c.pid_of("redis");
  REQUIRE(redis_pid > 0);
  REQUIRE(::kill(redis_pid, SIGKILL) == 0);
  REQUIRE(poll_until([&] { return process_gone(redis_pid); }, std::chrono::seconds(10)));
  const pid_t new_redis = c.restarted_gcs(redis_pid);
  REQUIRE(new_redis > 0);
  Json after = wait_for_end(c, id3, std::chrono::seconds(180));
  Json j3 = job_of(after, id3);
  INFO(j3.dump(1) << c.logs_tail());
  REQUIRE(j3.at("state") == "SUCCEEDED");
  for (const auto& [role, pid] : before_gcs_kill) {  // no node gave up on the cluster
    if (role == "redis") continue;
    INFO(role << " (pid " << pid << ") exited after the GCS was killed");
    CHECK(!process_gone(pid));
  }
  // No restart is spent on the outage: the workers' GCS clients wait it out (outage_grace_ms), and
  // a conditional write the kill cut off is settled by reading the field (gcs/redis_store.h).
  Json spent = event_of(after, "job_restarting", id3);
  INFO("restart: " << spent.dump());
  CHECK(spent.is_null());
  CHECK(within_half_point(accuracy_of(after, id3), baseline));
  Json accounting;
  poll_until([&] {
    Json now = c.try_status(300);
    return !now.is_null() && !(accounting = event_of(now, "data_accounted", id3)).is_null();
  }, std::chrono::seconds(30));
  REQUIRE_FALSE(accounting.is_null());
  CHECK(accounting.at("message").get<std::string>().find("trained exactly once") != std::string::npos);
}

TEST_CASE("faults: a user's trainer that throws restarts the job (sync from its checkpoint, async replacing the worker)",
          "[jobs][cluster][faults]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 4");
  const std::string lib = TROUPE_FLAKY_TRAINER;
  const std::string ckpt = c.home() + "/ckpt";
  const std::string done_marker = c.home() + "/already-thrown";
  {  // the same jobs without the fault: the marker exists, so nothing throws
    std::ofstream(done_marker) << "x\n";
  }
  struct Case {
    std::string strategy, args;
    bool accounted;
  };
  const Case cases[] = {
      {"sync", "--strategy sync --workers 2 --checkpoint-every 100 --checkpoint-dir " + ckpt, true},
      // (--restart-on other: the replacement goes to the other node of the two.)
      {"async", "--strategy async --workers 2 --ps 1 --restart-on other", false},
  };
  for (const Case& k : cases) {
    SECTION(k.strategy) {
      const std::string common = "--lib " + lib + " --trainer flaky --epochs 3 --batch-size 64 " + k.args;
      auto base = c.troupe("submit " + common + " --trainer-arg marker=" + done_marker + " --json --no-progress", 180);
      INFO(base.both() << c.logs_tail());
      REQUIRE(base.exit_code == 0);
      const double baseline = Json::parse(base.last_line()).at("test_accuracy").get<double>();

      const std::string marker = c.home() + "/thrown-" + k.strategy;
      auto r = c.troupe("submit " + common + " --trainer-arg marker=" + marker +
                        " --trainer-arg throw_at=250 --trainer-arg throw_rank=1 --json --no-progress", 180);
      INFO(r.both() << c.logs_tail());
      REQUIRE(r.exit_code == 0);
      CHECK(fs::exists(marker));  // it did throw
      const std::string id = Json::parse(r.last_line()).at("job_id");
      Json view = c.status(300);
      check_recovered(c, view, id, baseline, k.accounted);
      if (k.strategy == "async") {
        accounted_event(c, id);  // its replacement took over exactly once
        // "... failed: ...; replacing it on another node than <node> ...", and the replacement
        // "(actor <id> on node <other>) replaces the failed ...".
        const std::string restarting = event_of(view, "job_restarting", id).at("message").get<std::string>();
        const size_t at = restarting.find("replacing it on another node than ");
        REQUIRE(at != std::string::npos);
        const std::string failed_node = restarting.substr(at + 34, 8);
        const std::string restarted = event_of(view, "job_restarted", id).at("message").get<std::string>();
        INFO(restarting << "\n" << restarted);
        CHECK(restarted.find(" on node ") != std::string::npos);
        CHECK(restarted.find(" on node " + failed_node) == std::string::npos);
      }
      // The exception is on record: in the restart's cause, or (when a peer's exit, "rank 1 closed
      // its connection", reached the supervisor first) in the throwing actor's death.
      bool named = false;
      std::string events;
      for (const Json& e : view.at("events")) {
        named |= e.at("message").get<std::string>().find("flaky trainer: the fault injected at step 250") !=
                 std::string::npos;
        if (e.value("subject", "") == id || e.at("kind") != "checkpoint_written")
          events += e.at("kind").get<std::string>() + ": " + e.at("message").get<std::string>() + "\n";
      }
      INFO(events);
      CHECK(named);
    }
  }
}

TEST_CASE("faults: a cut link to a worker's host is detected like a dead node and the job restarts without it",
          "[jobs][cluster][faults][netns]") {
  auto hosts = two_hosts("10.231.9.1", "10.231.9.2", "f", "--nodes 1 --cpus 2");  // host A: 4 cpus
  if (!hosts) return;  // skipped, saying why
  ClusterFixture& a = hosts->a;
  const std::string ckpt = a.home() + "/ckpt";
  const std::string id = submit_detached(a, "--strategy sync --workers 4 --epochs 4 --batch-size 128 "
                                            "--checkpoint-every 100 --checkpoint-dir " + ckpt);
  Json view = wait_for_step(a, id, 500);
  std::string remote;  // host B's node
  for (const Json& n : view.at("nodes")) {
    if (n.at("address").get<std::string>().rfind(hosts->b_prefix(), 0) == 0) remote = n.at("id");
  }
  REQUIRE_FALSE(remote.empty());
  bool worker_there = false;
  for (const Json& a_ : view.at("actors")) worker_there |= a_.value("job", "") == id && a_.at("node") == remote;
  REQUIRE(worker_there);  // spread placement puts one of the 4 workers on each of the 3 nodes at least
  const int64_t cut_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  hosts->cut_b();

  Json end = wait_for_end(a, id, std::chrono::seconds(180));
  Json job = job_of(end, id);
  INFO(job.dump(1) << a.logs_tail());
  REQUIRE(job.at("state") == "SUCCEEDED");
  Json restarting = event_of(end, "job_restarting", id);
  REQUIRE_FALSE(restarting.is_null());
  CHECK(restarting.at("message").get<std::string>().find("its node " + remote.substr(0, 8) + " is gone") !=
        std::string::npos);
  // The near side's workers, stuck in an all-reduce with the unreachable rank, leave it when stopped
  // (their transports are interrupted): none is left behind past the supervisor's grace.
  std::string head_log;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(a.session_dir() + "/logs", ec))
    if (e.path().filename().string().rfind("head", 0) == 0) head_log += slurp(e.path().string());
  REQUIRE_FALSE(head_log.empty());
  CHECK(head_log.find("did not exit within") == std::string::npos);
  WARN("cut link to node " << remote.substr(0, 8) << ": restart began " << restarting.value("time_ms", int64_t{0}) - cut_ms
                           << " ms after the cut, training resumed "
                           << event_of(end, "job_resumed", id).value("time_ms", int64_t{0}) - cut_ms << " ms after it");
}

TEST_CASE("faults: an async job whose worker node is killed replaces the worker, which goes on at its clock",
          "[jobs][cluster][faults][async]") {
  ClusterFixture c;
  const DashboardUrl url = dashboard_url(c.up("--nodes 2 --cpus 2").out);
  // The server asks for a whole node, so the two workers sit on the other two.
  const std::string job_args = "--strategy async --workers 2 --ps 1 --cpus-per-ps 2 --epochs 6 --batch-size 64";
  const double baseline = fault_free_accuracy(c, job_args);

  const std::string id = submit_detached(c, job_args);
  Json view = wait_for_step(c, id, 2000);
  const auto [victim, pid] = worker_node_without_server(view, id);
  REQUIRE_FALSE(victim.empty());
  REQUIRE(::kill(pid, SIGKILL) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(180));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, false);
  CHECK(event_of(end, "job_restarting", id).at("message").get<std::string>().find("replacing it") != std::string::npos);
  // The replacement's first step is when the job trained again: an event, and /metrics' resume time.
  CHECK(event_of(end, "job_resumed", id).at("message").get<std::string>().find("a replacement worker") !=
        std::string::npos);
  check_recovery_metrics(url, id);
  // Exactly once, proven from the GCS: the replacement took over its predecessor's shards where the
  // servers' applied data ended (and completed a push that reached only some servers).
  // (A node killed while its worker was between two shards leaves none to move: the event says so.)
  Json moved = event_of(end, "shards_moved", id);
  REQUIRE_FALSE(moved.is_null());
  const std::string how = moved.at("message").get<std::string>();
  CHECK((how.find("resume where the parameter servers' applied data ends") != std::string::npos ||
         how.find("held no shards (it died between two)") != std::string::npos));
  Json accounting = accounted_event(c, id);
  WARN("async worker killed: " << moved.at("message").get<std::string>() << " | "
                               << accounting.at("message").get<std::string>());
}

TEST_CASE("faults: an async job whose parameter server node is killed restores that server from its checkpoint",
          "[jobs][cluster][faults][async]") {
  ClusterFixture c;
  // Each server asks for a whole node, so the workers sit elsewhere, and a free node is left for the
  // replacement whichever way the workers were placed.
  c.up("--nodes 4 --cpus 2");
  const std::string job_args = "--strategy async --workers 2 --ps 2 --cpus-per-ps 2 --epochs 6 --batch-size 64 "
                               "--checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt";
  auto base = c.troupe("submit " + job_args + " --json --no-progress", 180);
  INFO(base.both() << c.logs_tail());
  REQUIRE(base.exit_code == 0);
  const double baseline = Json::parse(base.last_line()).at("test_accuracy").get<double>();

  const std::string id = submit_detached(c, job_args);
  // Killed mid-job, once a checkpoint of the job exists, and well after the newest one (between
  // checkpoints, 100 steps of every worker apart), so the replacement has pushes to be replayed.
  Json view = between_checkpoints(c, id);
  REQUIRE_FALSE(event_of(view, "checkpoint_written", id).is_null());
  std::string victim;
  for (const Json& a : view.at("actors")) {
    if (a.value("job", "") != id || a.at("state") != "ALIVE" || a.at("type") != "troupe.ps") continue;
    for (const Json& n : view.at("nodes")) {
      if (n.at("id") == a.at("node") && !n.value("is_head", false)) victim = n.at("id");
    }
  }
  REQUIRE_FALSE(victim.empty());
  pid_t pid = 0;
  for (const Json& n : view.at("nodes")) if (n.at("id") == victim) pid = n.at("pid").get<pid_t>();
  const int64_t killed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(::kill(pid, SIGKILL) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(180));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, false);
  CHECK(event_of(end, "job_restarting", id).at("message").get<std::string>().find("replacing it") != std::string::npos);
  WARN("killed the node of a parameter server: restart began "
       << event_of(end, "job_restarting", id).value("time_ms", int64_t{0}) - killed_ms << " ms after the kill, the "
       << "replacement restored its shard " << event_of(end, "server_restored", id).value("time_ms", int64_t{0}) - killed_ms
       << " ms after it");
  // The replacement restored its shard from a checkpoint; the other server kept its state.
  Json restored = event_of(end, "server_restored", id);
  REQUIRE_FALSE(restored.is_null());
  const std::string said = restored.at("message").get<std::string>();
  CHECK(said.find("its shard restored from the checkpoint of job " + id.substr(0, 8)) != std::string::npos);
  CHECK(said.find("the other shards keep their state") != std::string::npos);
  WARN("async, 2 servers: baseline accuracy " << baseline << ", with a server node killed "
                                              << accuracy_of(end, id) << "; " << said);
  // The restored server took its record of the applied data from the checkpoint, the workers
  // replayed the pushes it lost: every example applied exactly once on both servers.
  Json accounting = accounted_event(c, id);
  const std::string proof = accounting.at("message").get<std::string>();
  // (How many pushes were replayed depends on where the kill fell after the newest checkpoint: the
  // status' step lags the workers; typically tens to a couple of hundred.)
  CHECK(proof.find("1 server(s) restored from a checkpoint, ") != std::string::npos);
  WARN("async, a parameter server restored: " << proof);
}

TEST_CASE("faults: an async job whose node held a worker and a parameter server replaces both at once, restores the "
          "server and loses no example", "[jobs][cluster][faults][async]") {
  ClusterFixture c;
  // As a user met it: two nodes of 4 cpus, the actors spread, each node holding a worker and a
  // server; the other node has room for the replacements. The head offers half a cpu, so it holds
  // none of the job's actors (of one cpu each), and the spread placement is the same whatever the
  // nodes' random ids: worker-0, worker-1, then ps-0 and ps-1 on the two nodes in turn.
  c.up_beside_head(2, 4);
  const std::string job_args = "--strategy async --workers 2 --ps 2 --epochs 6 --batch-size 64 "
                               "--checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt";
  const double baseline = fault_free_accuracy(c, job_args);
  const std::string id = submit_detached(c, job_args);
  const auto [victim, pid] = node_with_worker_and_server(wait_for_step(c, id, 20), id);
  INFO("no node besides the head holds a worker and a server of job " << id);
  REQUIRE_FALSE(victim.empty());
  // Killed once a checkpoint exists and between two (its server's pushes after it are lost and
  // must be replayed, the dead worker's among them).
  Json view = between_checkpoints(c, id);
  REQUIRE(node_with_worker_and_server(view, id).first == victim);
  const int64_t killed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(::kill(pid, SIGKILL) == 0);

  Json end = wait_for_end(c, id, std::chrono::seconds(240));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, false);
  // One failure, one restart, both actors replaced (the server first), no replacement wasted.
  CHECK(event_messages(end, "job_restarting", id).size() == 1u);
  const std::string restarting = event_of(end, "job_restarting", id).at("message").get<std::string>();
  CHECK(restarting.find("replacing all 2") != std::string::npos);
  CHECK(restarting.find("ps-") < restarting.find("worker-"));  // the server named (and placed) first
  Json restored = event_of(end, "server_restored", id);
  REQUIRE_FALSE(restored.is_null());
  // The replacement worker replayed its predecessor's pushes that the restored server lost (none
  // when the checkpoint fell after its last push: the kill's timing decides), and every example
  // was applied exactly once on both servers.
  Json moved = event_of(end, "shards_moved", id);
  REQUIRE_FALSE(moved.is_null());
  const std::string how = moved.at("message").get<std::string>();
  Json accounting = accounted_event(c, id);
  WARN("async, a worker and a server on one node killed: restart began "
       << event_of(end, "job_restarting", id).value("time_ms", int64_t{0}) - killed_ms << " ms after the kill, the "
       << "server restored " << restored.value("time_ms", int64_t{0}) - killed_ms << " ms after it; accuracy "
       << accuracy_of(end, id) << " against " << baseline << "; " << how << " | "
       << accounting.at("message").get<std::string>());
}

TEST_CASE("faults: a hung worker stalls the job, which the supervisor restarts from its checkpoint",
          "[jobs][cluster][faults]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 4");
  const std::string marker = c.home() + "/hung";
  // Rank 1 sleeps 20 s at its 300th step; rank 0 waits for it in the all-reduce (whose deadline is a
  // minute away), so the job's step count stands still until the supervisor's 3 s run out.
  auto r = c.troupe("submit --lib " + std::string(TROUPE_FLAKY_TRAINER) + " --trainer flaky --strategy sync --workers 2 "
                    "--epochs 2 --batch-size 64 --checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt "
                    "--progress-timeout 3 --trainer-arg marker=" + marker + " --trainer-arg throw_at=300 "
                    "--trainer-arg throw_rank=1 --trainer-arg hang_ms=20000 --json --no-progress", 180);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(marker));  // it did hang
  const std::string id = Json::parse(r.last_line()).at("job_id");
  Json view = c.status(300);
  Json restarting = event_of(view, "job_restarting", id);
  REQUIRE_FALSE(restarting.is_null());
  CHECK(restarting.at("message").get<std::string>().find("the job made no progress for 3") != std::string::npos);
  CHECK_FALSE(event_of(view, "job_resumed", id).is_null());
  CHECK(job_of(view, id).at("state") == "SUCCEEDED");
}

TEST_CASE("faults: a pipeline with --recovery checkpoint whose stage's node is killed restarts every stage from its "
          "part of the checkpoint",
          "[jobs][cluster][faults][pipeline]") {
  ClusterFixture c;
  c.up("--nodes 2 --cpus 2");  // 6 cpus on 3 processes: 4 stages, and room for them after one node dies
  const std::string ckpt = c.home() + "/ckpt";
  // (The default, --recovery auto, recovers a pipeline live: tests/jobs/live_recovery_cluster_test.cc.)
  const std::string job_args = "--strategy pipeline --stages 4 --microbatches 2 --hidden 128,64,32 --epochs 4 "
                               "--batch-size 128 --checkpoint-every 100 --recovery checkpoint --checkpoint-dir " + ckpt;
  const double baseline = fault_free_accuracy(c, job_args);

  const std::string id = submit_detached(c, job_args);
  Json view = wait_for_step(c, id, 650);  // in epoch 2, past a few checkpoints
  const pid_t pid = node_hosting(view, id).second;  // a node process (not the head) with one of its stages
  REQUIRE(pid > 0);
  REQUIRE(::kill(pid, SIGKILL) == 0);

  // The stages left fail naming the dead neighbour; the supervisor places all four again, each
  // loads its own layers from the newest checkpoint and the pipeline goes on from its step.
  Json end = wait_for_end(c, id, std::chrono::seconds(180));
  INFO(c.logs_tail());
  check_recovered(c, end, id, baseline, true);
  Json j = job_of(end, id);
  const int64_t from = j.at("result").at("resumed_from").at("step").get<int64_t>();
  CHECK(from >= 600);  // not from the beginning: the checkpoint before the kill
  CHECK(from % 100 == 0);
  CHECK(event_of(end, "job_resumed", id).at("message").get<std::string>().find(
            "started from job " + id.substr(0, 8) + " step " + std::to_string(from)) != std::string::npos);
  CHECK(j.at("result").at("steps").get<int64_t>() == 4 * (60000 / 128));
  // One replica has no all-reduce: a pipeline resumed from its checkpoint computes what the
  // uninterrupted one computed, bit for bit (tests/trainers/pipeline/pipeline_test.cc), so the same accuracy.
  CHECK(accuracy_of(end, id) == baseline);
  WARN("pipeline: stage node killed at step >= 650, resumed from the checkpoint of step "
       << from << ", accuracy " << accuracy_of(end, id) << " vs " << baseline << " without the fault");
}

namespace {

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

// A live elastic job that shrank (the default recovery): the survivors went on from their own
// memory, restarted by nobody, with no completed step lost, accounted exactly once.
void check_shrunk_live(ClusterFixture& c, const Json& view, const std::string& id, double baseline) {
  Json j = job_of(view, id);
  INFO(j.dump(1));
  REQUIRE(j.at("state") == "SUCCEEDED");
  CHECK(within_half_point(accuracy_of(view, id), baseline));
  Json restarting = event_of(view, "job_restarting", id);
  REQUIRE_FALSE(restarting.is_null());
  CHECK(restarting.at("message").get<std::string>().find("while the others go on (restart 1 of 3)") != std::string::npos);
  CHECK(any_contains(event_messages(view, "job_resized", id), "from the survivors' memory"));
  Json live = event_of(view, "job_recovered_live", id);
  REQUIRE_FALSE(live.is_null());
  WARN("shrunk live: " << live.at("message").get<std::string>());
  const Json recovery = j.at("result").at("recovery");
  INFO(recovery.dump());
  CHECK(recovery.at("mode") == "live");
  CHECK(recovery.at("steps_lost").get<int64_t>() == 0);
  Json accounting = accounted_event(c, id);
  CHECK(accounting.at("message").get<std::string>().find("trained exactly once") != std::string::npos);
}

// An elastic job of 4 workers (`job_args`) whose node hosting workers is SIGKILLed at `step`, with
// no replacement: it ends SUCCEEDED with `workers` of 4, within half a point of `baseline`,
// accounted exactly once; live (the survivors' memory) unless `job_args` asks for the checkpoint.
void shrink_after_a_kill(ClusterFixture& c, const std::string& job_args, int64_t step, double baseline, int workers) {
  const std::string id = submit_detached(c, job_args);
  Json view = wait_for_step(c, id, step);
  const auto [victim, pid] = node_hosting(view, id);
  REQUIRE_FALSE(victim.empty());
  REQUIRE(::kill(pid, SIGKILL) == 0);
  Json end = wait_for_end(c, id, std::chrono::seconds(180));
  INFO(c.logs_tail());
  if (job_args.find("--recovery checkpoint") != std::string::npos) check_recovered(c, end, id, baseline, true);
  else check_shrunk_live(c, end, id, baseline);
  const std::vector<std::string> resized = event_messages(end, "job_resized", id);
  for (const std::string& line : resized) UNSCOPED_INFO(line);
  CHECK(any_contains(resized, "continues with " + std::to_string(workers) + " of 4 workers"));
  CHECK(job_of(end, id).at("result").value("final_workers", 0) == workers);
  WARN("elastic: fault-free accuracy " << baseline << ", with " << workers << " of 4 workers after the kill "
                                       << accuracy_of(end, id));
}

}  // namespace

namespace {

// An elastic job of 4 workers (`job_args`) on a cluster of the head and one node of 2 cpus each:
// (1) the node killed at `kill_step` with no replacement: it finishes with 2 workers, live, 2
// shards each; (2) a node joins, the job starts on 4, that node is killed (2 go on) and another
// joins: the job grows back to 4 at once, the newcomers filled from the survivors' memory, and
// ends as well as without faults, accounted exactly once. The job_recovered_live events' messages.
std::vector<std::string> shrink_and_grow_back(ClusterFixture& c, const std::string& job_args, int64_t kill_step) {
  const double baseline = fault_free_accuracy(c, job_args);
  shrink_after_a_kill(c, job_args, kill_step, baseline, 2);

  ClusterFixture first_joiner, second_joiner;
  join_node(c, first_joiner);
  const std::string id2 = submit_detached(c, job_args);
  Json view = wait_for_step(c, id2, kill_step);
  const auto [victim2, pid2] = node_hosting(view, id2);
  REQUIRE_FALSE(victim2.empty());
  REQUIRE(::kill(pid2, SIGKILL) == 0);
  REQUIRE(poll_until([&] {
    Json now = c.try_status(300);
    return !now.is_null() && any_contains(event_messages(now, "job_resized", id2), "continues with 2 of 4");
  }, std::chrono::seconds(120)));
  join_node(c, second_joiner);
  Json end2 = wait_for_end(c, id2, std::chrono::seconds(180));
  INFO(c.logs_tail());
  Json j2 = job_of(end2, id2);
  INFO(j2.dump(1));
  REQUIRE(j2.at("state") == "SUCCEEDED");
  CHECK(within_half_point(accuracy_of(end2, id2), baseline));
  // Live: the newcomers join at once, filled from a survivor's memory (no checkpoint waited for).
  CHECK(any_contains(event_messages(end2, "job_resized", id2), "grows back to 4 of 4 workers; the newcomers take the "
                                                                "state from a survivor's memory"));
  CHECK(j2.at("result").at("recovery").at("mode") == "live");
  CHECK(j2.at("result").value("final_workers", 0) == 4);
  WARN("elastic: shrunk and grown back, accuracy " << accuracy_of(end2, id2) << "; resizes: "
                                                   << event_messages(end2, "job_resized", id2).size());
  Json accounting;
  poll_until([&] {
    Json now = c.try_status(300);
    return !now.is_null() && !(accounting = event_of(now, "data_accounted", id2)).is_null();
  }, std::chrono::seconds(30));
  REQUIRE_FALSE(accounting.is_null());
  CHECK(accounting.at("message").get<std::string>().find("trained exactly once") != std::string::npos);
  return event_messages(end2, "job_recovered_live", id2);
}

}  // namespace

TEST_CASE("faults: an elastic sync job goes on from memory with the workers that fit after its node is killed and "
          "grows back live when a node joins", "[jobs][cluster][faults][elastic]") {
  ClusterFixture c;
  // 4 cpus on 2 processes (the head and one node): 4 workers, and after the node dies room for 2
  // (with two nodes, the head and the survivor would still hold all 4).
  c.up("--nodes 1 --cpus 2");
  shrink_and_grow_back(c, "--strategy sync --elastic --workers 4 --epochs 10 --batch-size 128 --checkpoint-every 100 "
                          "--checkpoint-dir " + c.home() + "/ckpt", 1100);
}

TEST_CASE("faults: an elastic --shard gradients job goes on from its buddy mirrors re-cut for the workers that fit "
          "after its node is killed, and grows back live", "[jobs][cluster][faults][elastic][sharded]") {
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");
  // No --checkpoint-every: nothing on disk to go back to, so the job either goes on from memory or
  // starts over (and the steps-lost check fails).
  const std::vector<std::string> live = shrink_and_grow_back(
      c, "--strategy sync --elastic --shard gradients --workers 4 --epochs 4 --batch-size 128", 700);
  for (const std::string& line : live) UNSCOPED_INFO(line);
  // The shrink and the grow-back both re-cut the shares: 4 ranks' for 2, then 2 ranks' for 4.
  CHECK(any_contains(live, "the shards of 4 ranks, re-cut"));
  CHECK(any_contains(live, "the shards of 2 ranks, re-cut"));
}

TEST_CASE("faults: an elastic sync job shrinks unevenly, 3 of 4 workers with 4 shards, and is accounted exactly once",
          "[jobs][cluster][faults][elastic]") {
  ClusterFixture c, joiner;
  // The head with 3 cpus and a node with 1: the 4 workers are placed 3 + 1, and killing the node
  // leaves room for 3 — one of them then trains two of the epoch's 4 shards side by side.
  c.up("--nodes 0 --cpus 3");
  const Json info = c.cluster_file();
  auto join = joiner.troupe("up --address " + info.at("head_address").get<std::string>() + " --token " +
                            info.at("token").get<std::string>() + " --cpus 1 --timeout 30", 60);
  INFO(join.both() << c.logs_tail() << joiner.logs_tail());
  REQUIRE(join.exit_code == 0);
  // The checkpoint path (--recovery checkpoint); the other elastic test and the matrix go on live.
  const std::string job_args = "--strategy sync --elastic --workers 4 --epochs 6 --batch-size 128 "
                               "--recovery checkpoint --checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt";
  const double baseline = fault_free_accuracy(c, job_args);

  shrink_after_a_kill(c, job_args, 700, baseline, 3);
}
