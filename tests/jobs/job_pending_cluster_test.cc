// A job that waits for room to replace a dead actor, on a real cluster that is full (the normal state
// of a busy one): the replacements are one PENDING actor record each, however long they wait and
// however many times the head tries to place them, and none is left once the job ended. Counted
// from the GCS itself (the cluster's redis-server), not from the CLI's view. (Issue 41: each retry
// used to write a new record, ~40 a second, kept forever.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "gcs/records.h"
#include "gcs/redis_store.h"
#include "gcs/tables.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"

using namespace troupe::testing;

namespace {


// The GCS's PENDING actor records of job `job` (by its id's hex prefix), and of every job.
struct PendingCount {
  size_t of_job = 0, all = 0;
};
PendingCount count_pending(troupe::gcs::Store& store, const std::string& job) {
  auto actors = troupe::gcs::Table<troupe::gcs::ActorRecord>(store).list();
  REQUIRE(actors.ok());
  PendingCount n;
  for (const auto& a : *actors) {
    if (a.state != troupe::gcs::ActorState::pending) continue;
    ++n.all;
    if (a.job.hex().rfind(job, 0) == 0) ++n.of_job;
  }
  return n;
}

}  // namespace

TEST_CASE("pending: a job waiting on a full cluster to replace a worker and a server holds one PENDING record per "
          "replaced actor, and none once it ended", "[jobs][cluster][faults][pending]") {
  ClusterFixture c;
  // As a user met it: the head and two nodes of 2 cpus each; the head busy with an actor of its
  // own, the job's 2 workers and 2 servers on the two nodes: the cluster is full.
  c.up("--nodes 2 --cpus 2");
  const Json before = c.status();
  std::string head;
  for (const Json& n : before.at("nodes"))
    if (n.value("is_head", false)) head = n.at("id").get<std::string>();
  REQUIRE_FALSE(head.empty());
  auto busy = c.troupe("spawn echo --cpus 2 --node " + head);
  INFO(busy.both());
  REQUIRE(busy.exit_code == 0);
  const std::string job_args = "--strategy async --workers 2 --ps 2 --epochs 4 --batch-size 64 "
                               "--checkpoint-every 100 --checkpoint-dir " + c.home() + "/ckpt";
  // The node to kill must hold a worker and a server; a job placed otherwise is submitted again.
  std::string id, victim;
  pid_t pid = 0;
  for (int tries = 0; tries < 12 && victim.empty(); ++tries) {
    id = submit_detached(c, job_args);
    Json view = wait_for_step(c, id, 300);  // a checkpoint exists: the server can be restored
    std::tie(victim, pid) = node_with_worker_and_server(view, id);
    if (victim.empty()) REQUIRE(c.troupe("stop " + id, 60).exit_code == 0);
  }
  REQUIRE_FALSE(victim.empty());
  auto gcs = cluster_gcs(c);
  REQUIRE(::kill(pid, SIGKILL) == 0);

  // 30 s with no room: the head retries the placement every second or faster; the GCS holds at
  // most the two replacements PENDING at every look.
  size_t most = 0;
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < wait_until) {
    const PendingCount n = count_pending(*gcs, id);
    INFO("PENDING records of the job: " << n.of_job << ", of all: " << n.all);
    REQUIRE(n.of_job <= 2u);
    REQUIRE(n.all == n.of_job);  // nothing else waits on this cluster
    most = std::max(most, n.of_job);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  CHECK(most == 2u);  // both replacements did wait (the kill was seen, the cluster was full)
  Json waiting = job_of(c.status(), id);
  CHECK(waiting.at("message").get<std::string>().find("waiting for resources") != std::string::npos);

  // Room comes: a node joins. The job recovers and ends; still at most two PENDING meanwhile.
  ClusterFixture joiner;
  join_node(c, joiner);
  const auto end_by = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  std::string state;
  while (std::chrono::steady_clock::now() < end_by) {
    REQUIRE(count_pending(*gcs, id).of_job <= 2u);
    Json j = job_of(c.status(), id);
    state = j.is_null() ? "" : j.at("state").get<std::string>();
    if (state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  INFO(c.logs_tail());
  REQUIRE(state == "SUCCEEDED");
  Json end = c.status(50);
  CHECK(event_messages(end, "job_restarting", id).size() == 1u);
  CHECK(event_messages(end, "job_restarted", id).size() == 2u);  // the server and the worker, once each
  accounted_event(c, id);  // every example applied exactly once, across the replaced server
  // Once the job ended, nothing of it is PENDING in the GCS (the servers stop just after the workers).
  CHECK(poll_until([&] { return count_pending(*gcs, id).all == 0u; }, std::chrono::seconds(15)));
}
