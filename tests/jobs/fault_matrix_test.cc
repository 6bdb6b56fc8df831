// The fault matrix (issue 29): every strategy x where the victim's actors are x how it fails, on a
// real local cluster, nothing restarted for the job by the test. One CTest test per cell, labelled
// "matrix" and left out of the default suite (scripts/test.sh runs `ctest -LE matrix`; run these
// with `ctest -L matrix`, about a minute a cell on 2 cores). Each cell requires what users rely on:
// the job ends SUCCEEDED after a restart, its data accounted exactly once, within half a point of
// the same job without the fault. Detection (fault -> job_restarting) and resume (fault ->
// the step count moving again) go to build/fault-matrix.tsv, one line per cell, for
// docs/benchmarks.md.
//
// Placements are read off the running job (`troupe status`), never assumed: a cell whose cluster
// shape did not produce its placement fails saying so.
#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"
#include "tests/jobs/two_hosts.h"

using namespace troupe::testing;

namespace {

// What one node (not the head) holds of the job: its ALIVE workers and servers.
struct Holding {
  int workers = 0, servers = 0;
  pid_t pid = 0;
};
std::map<std::string, Holding> holdings(const Json& view, const std::string& job) {
  std::map<std::string, Holding> out;
  std::map<std::string, pid_t> nodes;
  for (const Json& n : view.at("nodes"))
    if (!n.value("is_head", false) && n.at("state") == "ALIVE") nodes[n.at("id")] = n.at("pid").get<pid_t>();
  for (const Json& a : view.at("actors")) {
    if (a.value("job", "") != job || a.at("state") != "ALIVE") continue;
    auto n = nodes.find(a.at("node").get<std::string>());
    if (n == nodes.end()) continue;
    Holding& h = out[n->first];
    h.pid = n->second;
    (a.at("type") == "troupe.ps" ? h.servers : h.workers) += 1;
  }
  return out;
}

// Picks the victim nodes from the view: node id -> pid; empty when the placement is not there (yet).
using Victims = std::function<std::map<std::string, pid_t>(const Json& view, const std::string& job)>;

Victims node_where(std::function<bool(const Holding&)> wanted) {
  return [wanted](const Json& view, const std::string& job) {
    std::map<std::string, pid_t> out;
    for (const auto& [id, h] : holdings(view, job)) {
      if (wanted(h)) {
        out[id] = h.pid;
        break;
      }
    }
    return out;
  };
}
Victims one_worker() { return node_where([](const Holding& h) { return h.workers == 1 && h.servers == 0; }); }
Victims several_workers() { return node_where([](const Holding& h) { return h.workers >= 2 && h.servers == 0; }); }
Victims worker_and_server() { return node_where([](const Holding& h) { return h.workers >= 1 && h.servers >= 1; }); }
Victims the_server() { return node_where([](const Holding& h) { return h.servers >= 1; }); }
Victims two_nodes() {
  return [](const Json& view, const std::string& job) {
    std::map<std::string, pid_t> out;
    for (const auto& [id, h] : holdings(view, job)) {
      if (h.workers + h.servers > 0 && out.size() < 2) out[id] = h.pid;
    }
    if (out.size() < 2) out.clear();
    return out;
  };
}

// Two nodes (not the head) that each hold at least two of the job's workers.
Victims two_nodes_several_workers() {
  return [](const Json& view, const std::string& job) {
    std::map<std::string, pid_t> out;
    for (const auto& [id, h] : holdings(view, job)) {
      if (h.workers >= 2 && out.size() < 2) out[id] = h.pid;
    }
    if (out.size() < 2) out.clear();
    return out;
  };
}

// Every node that holds a server of the job, when those are two or more nodes besides the head and
// they hold all of the job's servers: the job loses every server at once, on two nodes.
Victims every_server_on_two_nodes() {
  return [](const Json& view, const std::string& job) {
    int servers = 0;
    for (const Json& a : view.at("actors"))
      if (a.value("job", "") == job && a.at("state") == "ALIVE" && a.at("type") == "troupe.ps") ++servers;
    std::map<std::string, pid_t> out;
    int held = 0;
    for (const auto& [id, h] : holdings(view, job)) {
      if (h.servers > 0) {
        out[id] = h.pid;
        held += h.servers;
      }
    }
    if (out.size() < 2 || held != servers) out.clear();
    return out;
  };
}

// Two nodes that together hold the job's server and at least two of its workers.
Victims two_nodes_server_and_workers() {
  return [](const Json& view, const std::string& job) {
    const auto held = holdings(view, job);
    std::map<std::string, pid_t> out;
    for (auto i = held.begin(); i != held.end() && out.empty(); ++i) {
      for (auto k = std::next(i); k != held.end(); ++k) {
        if (i->second.servers + k->second.servers >= 1 && i->second.workers + k->second.workers >= 2) {
          out = {{i->first, i->second.pid}, {k->first, k->second.pid}};
          break;
        }
      }
    }
    return out;
  };
}

// The head process itself (its own node's actors die with it); the runner starts it again with
// `troupe up --restart-head`, as whatever supervises the head's host would.
Victims the_head(ClusterFixture& c) {
  return [&c](const Json& view, const std::string& job) {
    std::map<std::string, pid_t> out;
    std::string head;
    for (const Json& n : view.at("nodes"))
      if (n.value("is_head", false) && n.at("state") == "ALIVE") head = n.at("id");
    for (const Json& a : view.at("actors"))
      if (a.value("job", "") == job && a.at("state") == "ALIVE" && a.at("node") == head) out["head"] = c.pid_of("head");
    return out;
  };
}

struct Cell {
  std::string strategy;   // as the table says it
  std::string placement;  // as the table says it
  std::string up;         // `troupe up` flags
  std::string job;        // `troupe submit` flags (the checkpoint directory is added)
  Victims victims;        // empty: the head (the_head)
  int64_t at_step = 600;  // the fault comes once the job is this far (and has a checkpoint)
  double fill_head = 0;   // cpus of the head's own node taken first (the job's actors go elsewhere)
  std::string env;        // for `troupe up` (TROUPE_SCHEDULER_POLICY=pack: a gang fills node by node)
  std::vector<double> fill_a;  // cut cells: cpus of host A's nodes (the head first) taken while the job is placed
  // The cell must go on live (its job checkpoints too, so a fallback would otherwise pass unseen).
  bool expect_live = false;
};

// Takes `cpus` of the head's own node with an actor pinned there, so a job's actors go elsewhere.
void fill_head(ClusterFixture& c, double cpus) {
  std::string head;
  const Json first = c.status();
  for (const Json& n : first.at("nodes"))
    if (n.value("is_head", false)) head = n.at("id");
  auto filler = c.troupe("spawn echo --cpus " + std::to_string(cpus) + " --node " + head);
  INFO(filler.both());
  REQUIRE(filler.exit_code == 0);
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `how`: the sync job's summary's recovery ("live, 0 steps lost", "checkpoint, 37 steps lost"), or
// "" for strategies that do not say.
void record_row(const Cell& cell, const std::string& fault, int64_t detect_ms, int64_t resume_ms, int restarts,
                double acc, double baseline, const std::string& how) {
  std::ofstream out(std::string(TROUPE_BINARY_DIR) + "/fault-matrix.tsv", std::ios::app);
  out << cell.strategy << '\t' << cell.placement << '\t' << fault << '\t' << detect_ms << '\t' << resume_ms << '\t'
      << restarts << '\t' << acc << '\t' << baseline << '\t' << "exactly once" << '\t' << how << '\n';
}

// How a sync job went on after its restart, from its summary: "live, 0 steps lost" or "checkpoint, N
// steps lost"; "" when the summary does not say.
std::string recovery_of(const Json& job) {
  const Json result = job.value("result", Json::object());
  if (!result.is_object() || !result.contains("recovery") || !result.at("recovery").contains("mode")) return "";
  const Json& r = result.at("recovery");
  return r.value("mode", std::string()) + ", " + std::to_string(r.value("steps_lost", int64_t{-1})) + " steps lost";
}

// The view once the job is past cell.at_step, has written a checkpoint, and `placed(view)` holds.
Json when_placed(ClusterFixture& c, const Cell& cell, const std::string& id,
                 const std::function<bool(const Json&)>& placed) {
  Json view;
  REQUIRE(poll_until([&] {
    view = c.try_status(300);
    if (view.is_null()) return false;
    if (job_of(view, id).value("step", int64_t{0}) < cell.at_step || event_of(view, "checkpoint_written", id).is_null())
      return false;
    return placed(view);
  }, std::chrono::seconds(240), std::chrono::milliseconds(100)));
  return view;
}

// After the fault at t0 (ms), with the job at `step`: it must resume, end SUCCEEDED after a
// restart, within half a point of `baseline`, accounted exactly once; the row goes to the table.
// When each job's step count passed where it stood at the fault (`steps`, by job id) by 20, or it
// ended (ms; 0: not within 240 s).
std::map<std::string, int64_t> when_resumed(ClusterFixture& c, const std::map<std::string, int64_t>& steps) {
  std::map<std::string, int64_t> resumed;
  poll_until([&] {
    Json now = c.try_status(5);
    if (now.is_null()) return false;
    for (const auto& [id, step] : steps) {
      Json j = job_of(now, id);
      const std::string state = j.value("state", "");
      if (!resumed.count(id) && (j.value("step", int64_t{0}) > step + 20 || state == "SUCCEEDED" || state == "FAILED"))
        resumed[id] = state == "FAILED" ? 0 : now_ms();
    }
    return resumed.size() == steps.size();
  }, std::chrono::seconds(240), std::chrono::milliseconds(50));
  return resumed;
}

void settle_cell(ClusterFixture& c, const Cell& cell, const std::string& fault, const std::string& id, int64_t step,
                 int64_t t0, double baseline, int64_t resumed = -1) {
  if (resumed < 0) resumed = when_resumed(c, {{id, step}})[id];
  Json end = wait_for_end(c, id, std::chrono::seconds(300));
  Json j = job_of(end, id);
  INFO(j.dump(1) << c.logs_tail());
  REQUIRE(j.at("state") == "SUCCEEDED");
  Json restarting = event_of(end, "job_restarting", id);
  REQUIRE_FALSE(restarting.is_null());
  const int restarts = static_cast<int>(event_messages(end, "job_restarting", id).size());
  // One fault is one failure of the job, one restart of its budget, however many nodes it took.
  CHECK(restarts == 1);
  const double acc = accuracy_of(end, id);
  CHECK(within_half_point(acc, baseline));
  Json accounting = accounted_event(c, id);
  const int64_t detect = restarting.value("time_ms", int64_t{0}) - t0;
  const std::string how = recovery_of(j);
  if (cell.expect_live) CHECK(how.rfind("live", 0) == 0);
  record_row(cell, fault, detect, resumed > 0 ? resumed - t0 : -1, restarts, acc, baseline, how);
  WARN(cell.strategy << " / " << cell.placement << " / " << fault << ": detected " << detect << " ms, resumed "
                     << (resumed - t0) << " ms after the fault, " << restarts << " restart(s), " << how << "; accuracy " << acc
                     << " vs " << baseline << "; " << accounting.at("message").get<std::string>());
}

// The job's step once the fault struck: the view the victims were picked from can be a few
// progress reports old (the job trains on until the kill), and "resumed" means 20 steps past the
// last step the failed attempt recorded, not past an older one. `before` when status is down.
int64_t step_at_fault(ClusterFixture& c, const std::string& id, int64_t before) {
  const Json now = c.try_status(1);
  return now.is_null() ? before : std::max(before, job_of(now, id).value("step", int64_t{0}));
}

// The cell's job on its cluster: fault-free first, then faulted with SIGKILL of the victims' node
// processes, all at once.
void run_kill_cell(const Cell& cell, const std::string& fault) {
  ClusterFixture c;
  auto up = c.troupe("up " + cell.up, 90, cell.env);
  INFO(up.both() << c.logs_tail());
  REQUIRE(up.exit_code == 0);
  if (cell.fill_head > 0) fill_head(c, cell.fill_head);
  const Victims pick = cell.victims ? cell.victims : the_head(c);
  const std::string job_args = cell.job + " --checkpoint-dir " + c.home() + "/ckpt";
  const double baseline = fault_free_accuracy(c, job_args);
  const std::string id = submit_detached(c, job_args);
  std::map<std::string, pid_t> victims;
  const Json view = when_placed(c, cell, id, [&](const Json& v) {
    victims = pick(v, id);
    return !victims.empty();
  });
  INFO("placement " << cell.placement << " on " << view.at("actors").dump());
  int64_t step = job_of(view, id).value("step", int64_t{0});
  const int64_t t0 = now_ms();
  for (const auto& [node, pid] : victims) REQUIRE(::kill(pid, SIGKILL) == 0);
  if (cell.victims) step = step_at_fault(c, id, step);
  if (!cell.victims) {  // the head: started again at once
    const pid_t head = victims.begin()->second;
    REQUIRE(poll_until([&] { return process_gone(head); }, std::chrono::seconds(10)));
    auto restarted = c.troupe("up --restart-head", 60);
    INFO(restarted.both() << c.logs_tail());
    REQUIRE(restarted.exit_code == 0);
  }
  settle_cell(c, cell, fault, id, step, t0, baseline);
}

// The cell's job on a cluster over two network namespaces (host A: the head and `cell.up`'s nodes;
// host B: one node of 2 cpus), its link to host B cut once the job is this far with actors on B.
// The nodes on B never exit: the head finds B's node silent, declares it DEAD and the job restarts
// on host A.
//
// Cross cells (cell.fill_a) decide what B holds: while the job is placed, actors taking
// cell.fill_a[i] cpus of host A's i-th node (the head first) leave the job only B's room for its last
// actors; once the job runs they are stopped, so host A has room for the restart. on_b then says
// what B must hold.
void run_cut_cell(const Cell& cell, const std::function<bool(const Holding&)>& on_b = nullptr) {
  auto hosts = two_hosts("10.231.11.1", "10.231.11.2", "m", cell.up);
  if (!hosts) return;  // skipped, saying why
  ClusterFixture& a = hosts->a;
  const std::string job_args = cell.job + " --checkpoint-dir " + a.home() + "/ckpt";
  const double baseline = fault_free_accuracy(a, job_args);
  std::vector<std::string> fillers;
  if (!cell.fill_a.empty()) {
    std::vector<std::string> on_a;  // host A's nodes, the head first
    const Json nodes = a.status().at("nodes");
    for (const Json& n : nodes) {
      if (n.at("address").get<std::string>().rfind(hosts->b_prefix(), 0) == 0) continue;
      if (n.value("is_head", false)) on_a.insert(on_a.begin(), n.at("id").get<std::string>());
      else on_a.push_back(n.at("id").get<std::string>());
    }
    REQUIRE(on_a.size() >= cell.fill_a.size());
    for (size_t i = 0; i < cell.fill_a.size(); ++i) {
      if (cell.fill_a[i] <= 0) continue;
      auto spawned = a.troupe("spawn echo --json --cpus " + std::to_string(cell.fill_a[i]) + " --node " + on_a[i]);
      INFO(nodes.dump(1) << spawned.both());
      REQUIRE(spawned.exit_code == 0);
      const Json reply = Json::parse(spawned.out);
      REQUIRE(reply.value("started", 0) == 1);  // placed, not left pending
      fillers.push_back(reply.at("actor_ids").at(0).get<std::string>());
    }
  }
  const std::string id = submit_detached(a, job_args);
  const Json view = when_placed(a, cell, id, [&](const Json& v) {  // what the cell wants on host B
    std::string remote;
    for (const Json& n : v.at("nodes"))
      if (n.at("address").get<std::string>().rfind(hosts->b_prefix(), 0) == 0) remote = n.at("id");
    Holding b;
    for (const Json& x : v.at("actors")) {
      if (x.value("job", "") != id || x.at("state") != "ALIVE" || x.at("node") != remote) continue;
      (x.at("type") == "troupe.ps" ? b.servers : b.workers) += 1;
    }
    return on_b ? on_b(b) : b.workers + b.servers > 0;
  });
  INFO("placement " << cell.placement << " on " << view.at("actors").dump());
  for (const std::string& filler : fillers) {
    auto stopped = a.troupe("stop " + filler);
    INFO(stopped.both());
    REQUIRE(stopped.exit_code == 0);
  }
  int64_t step = job_of(view, id).value("step", int64_t{0});
  const int64_t t0 = now_ms();
  hosts->cut_b();
  step = step_at_fault(a, id, step);  // the job trained on while the filler was stopped
  settle_cell(a, cell, "link cut", id, step, t0, baseline);
}

// Two async jobs packed onto one node (the head placing with scheduler_policy=pack, its own cpus
// taken), so the victim holds the worker and the server of each; the node SIGKILLed once both
// have checkpoints: each job restores its server and replaces its worker on the other node.
void run_two_jobs_cell(const Cell& cell) {
  ClusterFixture c;
  auto up = c.troupe("up " + cell.up, 90, "TROUPE_SCHEDULER_POLICY=pack");
  INFO(up.both() << c.logs_tail());
  REQUIRE(up.exit_code == 0);
  fill_head(c, cell.fill_head);
  const double baseline = fault_free_accuracy(c, cell.job + " --checkpoint-dir " + c.home() + "/ckpt-base");
  const std::string one = submit_detached(c, cell.job + " --checkpoint-dir " + c.home() + "/ckpt-1");
  const std::string two = submit_detached(c, cell.job + " --checkpoint-dir " + c.home() + "/ckpt-2");
  std::map<std::string, pid_t> victims;
  Json view = when_placed(c, cell, one, [&](const Json& v) {
    if (job_of(v, two).value("step", int64_t{0}) < cell.at_step || event_of(v, "checkpoint_written", two).is_null())
      return false;
    const auto first_job = holdings(v, one), second_job = holdings(v, two);
    for (const auto& [node, h] : first_job) {
      auto other = second_job.find(node);
      if (h.servers > 0 && other != second_job.end() && other->second.servers > 0) victims[node] = h.pid;
    }
    return !victims.empty();
  });
  INFO("placement on " << view.at("actors").dump());
  int64_t step_one = job_of(view, one).value("step", int64_t{0});
  int64_t step_two = job_of(view, two).value("step", int64_t{0});
  const int64_t t0 = now_ms();
  for (const auto& [node, pid] : victims) REQUIRE(::kill(pid, SIGKILL) == 0);
  step_one = step_at_fault(c, one, step_one);
  step_two = step_at_fault(c, two, step_two);
  auto resumed = when_resumed(c, {{one, step_one}, {two, step_two}});
  settle_cell(c, cell, "kill -9 node (job 1 of 2)", one, step_one, t0, baseline, resumed[one]);
  settle_cell(c, cell, "kill -9 node (job 2 of 2)", two, step_two, t0, baseline, resumed[two]);
}

const std::string kSync = "--strategy sync --workers 4 --epochs 4 --batch-size 128 --checkpoint-every 100";
const std::string kElastic = "--strategy sync --elastic --workers 4 --epochs 4 --batch-size 128 --checkpoint-every 100";
const std::string kAsync = "--strategy async --workers 2 --ps 2 --epochs 4 --batch-size 64 --checkpoint-every 100";
const std::string kCentral = "--strategy central --workers 4 --epochs 4 --batch-size 128 --checkpoint-every 100";
const std::string kPipeline = "--strategy pipeline --stages 4 --microbatches 2 --hidden 128,64,32 --epochs 3 "
                              "--batch-size 128 --checkpoint-every 100";

}  // namespace

// ---- kill -9 of one node ----

TEST_CASE("matrix: sync, the victim holds one worker, kill -9", "[matrix]") {
  run_kill_cell({"sync", "one worker", "--nodes 3 --cpus 2", kSync, one_worker()}, "kill -9 node");
}
TEST_CASE("matrix: sync, the victim holds several workers, kill -9", "[matrix]") {
  run_kill_cell({"sync", "several workers", "--nodes 1 --cpus 4", kSync, several_workers()}, "kill -9 node");
}
TEST_CASE("matrix: elastic sync, the victim holds one worker, kill -9", "[matrix]") {
  run_kill_cell({"elastic sync", "one worker", "--nodes 3 --cpus 2", kElastic, one_worker()}, "kill -9 node");
}
TEST_CASE("matrix: elastic sync, the victim holds several workers, kill -9", "[matrix]") {
  run_kill_cell({"elastic sync", "several workers", "--nodes 1 --cpus 4", kElastic, several_workers()},
                "kill -9 node");
}
TEST_CASE("matrix: async, the victim holds one worker, kill -9", "[matrix]") {
  run_kill_cell({"async", "one worker", "--nodes 3 --cpus 2", kAsync, one_worker(), 1000}, "kill -9 node");
}
TEST_CASE("matrix: async, the victim holds a worker and a server, kill -9", "[matrix]") {
  // The head's cpus taken: spread deals w0, w1, s0, s1 over the two nodes in turn, so each holds a
  // worker and a server (with the head in the deal, the head's node could take the pair instead).
  run_kill_cell({"async", "a worker and a server", "--nodes 2 --cpus 4", kAsync, worker_and_server(), 1000, 4},
                "kill -9 node");
}
TEST_CASE("matrix: async, the victim holds every server, kill -9", "[matrix]") {
  run_kill_cell({"async (1 server)", "every server", "--nodes 4 --cpus 2",
                 "--strategy async --workers 2 --ps 1 --cpus-per-ps 2 --epochs 4 --batch-size 64 --checkpoint-every 100",
                 the_server(), 1000, 2},
                "kill -9 node");
}
TEST_CASE("matrix: central, the victim holds one worker, kill -9", "[matrix]") {
  run_kill_cell({"central", "one worker", "--nodes 4 --cpus 2", kCentral, one_worker()}, "kill -9 node");
}
TEST_CASE("matrix: central, the victim holds the server and workers, kill -9", "[matrix]") {
  run_kill_cell({"central", "the server and workers", "--nodes 2 --cpus 5", kCentral, worker_and_server(), 600, 5},
                "kill -9 node");
}
TEST_CASE("matrix: pipeline, the victim holds one stage, kill -9", "[matrix]") {
  run_kill_cell({"pipeline", "one stage", "--nodes 3 --cpus 2", kPipeline, one_worker()}, "kill -9 node");
}
TEST_CASE("matrix: pipeline, the victim holds two stages, kill -9", "[matrix]") {
  run_kill_cell({"pipeline", "two stages", "--nodes 1 --cpus 4", kPipeline, several_workers()}, "kill -9 node");
}

// ---- two nodes at once ----

TEST_CASE("matrix: sync, two nodes killed at once", "[matrix]") {
  run_kill_cell({"sync", "two nodes with workers", "--nodes 4 --cpus 2", kSync, two_nodes()}, "kill -9 two nodes");
}
TEST_CASE("matrix: elastic sync, two nodes killed at once", "[matrix]") {
  run_kill_cell({"elastic sync", "two nodes with workers", "--nodes 4 --cpus 2", kElastic, two_nodes()},
                "kill -9 two nodes");
}
TEST_CASE("matrix: async, two nodes killed at once", "[matrix]") {
  run_kill_cell({"async", "two nodes with actors", "--nodes 5 --cpus 2", kAsync, two_nodes(), 1000},
                "kill -9 two nodes");
}
TEST_CASE("matrix: central, two nodes killed at once", "[matrix]") {
  run_kill_cell({"central", "two nodes with actors", "--nodes 5 --cpus 2", kCentral, two_nodes()},
                "kill -9 two nodes");
}
TEST_CASE("matrix: pipeline, two nodes killed at once", "[matrix]") {
  run_kill_cell({"pipeline", "two nodes with stages", "--nodes 4 --cpus 2", kPipeline, two_nodes()},
                "kill -9 two nodes");
}

// ---- the head process (and its own node's actors) ----

TEST_CASE("matrix: sync, the head killed with a worker on its node, restarted", "[matrix]") {
  run_kill_cell({"sync", "the head's actors", "--nodes 3 --cpus 2", kSync, nullptr}, "kill -9 head");
}
TEST_CASE("matrix: async, the head killed with an actor on its node, restarted", "[matrix]") {
  run_kill_cell({"async", "the head's actors", "--nodes 3 --cpus 2", kAsync, nullptr, 1000}, "kill -9 head");
}
TEST_CASE("matrix: central, the head killed with an actor on its node, restarted", "[matrix]") {
  run_kill_cell({"central", "the head's actors", "--nodes 4 --cpus 2", kCentral, nullptr}, "kill -9 head");
}
TEST_CASE("matrix: pipeline, the head killed with a stage on its node, restarted", "[matrix]") {
  run_kill_cell({"pipeline", "the head's actors", "--nodes 3 --cpus 2", kPipeline, nullptr}, "kill -9 head");
}

// ---- the node cut off (its link down between two network namespaces) ----

TEST_CASE("matrix: sync, the link to a node with a worker cut", "[matrix][netns]") {
  run_cut_cell({"sync", "one node's actors cut off", "--nodes 1 --cpus 2", kSync, nullptr});
}
TEST_CASE("matrix: elastic sync, the link to a node with a worker cut", "[matrix][netns]") {
  run_cut_cell({"elastic sync", "one node's actors cut off", "--nodes 1 --cpus 2", kElastic, nullptr});
}
TEST_CASE("matrix: async, the link to a node with an actor cut", "[matrix][netns]") {
  run_cut_cell({"async", "one node's actors cut off", "--nodes 1 --cpus 2", kAsync, nullptr, 1000});
}
TEST_CASE("matrix: central, the link to a node with an actor cut", "[matrix][netns]") {
  run_cut_cell({"central", "one node's actors cut off", "--nodes 1 --cpus 3", kCentral, nullptr});
}
TEST_CASE("matrix: pipeline, the link to a node with a stage cut", "[matrix][netns]") {
  run_cut_cell({"pipeline", "one node's actors cut off", "--nodes 1 --cpus 2", kPipeline, nullptr});
}

// ---- cross cells: the placements of one node's cells under two nodes at once and a cut link ----

TEST_CASE("matrix: sync, two nodes killed at once, each with several workers", "[matrix]") {
  run_kill_cell({"sync", "two nodes, several workers each", "--nodes 4 --cpus 2", kSync, two_nodes_several_workers(),
                 600, 2, "TROUPE_SCHEDULER_POLICY=pack"},
                "kill -9 two nodes");
}
TEST_CASE("matrix: elastic sync, two nodes killed at once, each with several workers", "[matrix]") {
  run_kill_cell({"elastic sync", "two nodes, several workers each", "--nodes 4 --cpus 2", kElastic,
                 two_nodes_several_workers(), 600, 2, "TROUPE_SCHEDULER_POLICY=pack"},
                "kill -9 two nodes");
}
TEST_CASE("matrix: async, two nodes killed at once, holding every server", "[matrix]") {
  run_kill_cell({"async", "two nodes holding every server", "--nodes 5 --cpus 2", kAsync, every_server_on_two_nodes(),
                 1000, 2},
                "kill -9 two nodes");
}
TEST_CASE("matrix: central, two nodes killed at once, holding the server and several workers", "[matrix]") {
  run_kill_cell({"central", "two nodes, the server and workers", "--nodes 5 --cpus 2", kCentral,
                 two_nodes_server_and_workers(), 600, 2, "TROUPE_SCHEDULER_POLICY=pack"},
                "kill -9 two nodes");
}
TEST_CASE("matrix: pipeline, two nodes killed at once, each with two stages", "[matrix]") {
  run_kill_cell({"pipeline", "two nodes, two stages each", "--nodes 4 --cpus 2", kPipeline,
                 two_nodes_several_workers(), 600, 2, "TROUPE_SCHEDULER_POLICY=pack"},
                "kill -9 two nodes");
}
TEST_CASE("matrix: sync, the link cut to a node with several workers", "[matrix][netns]") {
  Cell cell{"sync", "several workers cut off", "--nodes 1 --cpus 2", kSync, nullptr};
  cell.fill_a = {2};  // host A keeps room for 2 of the 4 workers (on its second node): B gets the other 2
  run_cut_cell(cell, [](const Holding& b) { return b.workers >= 2; });
}
TEST_CASE("matrix: elastic sync, the link cut to a node with several workers", "[matrix][netns]") {
  Cell cell{"elastic sync", "several workers cut off", "--nodes 1 --cpus 2", kElastic, nullptr};
  cell.fill_a = {2};
  run_cut_cell(cell, [](const Holding& b) { return b.workers >= 2; });
}
TEST_CASE("matrix: async, the link cut to a node with a worker and every server", "[matrix][netns]") {
  // The whole job on B (1 worker, 1 server): everything it has is cut off at once.
  Cell cell{"async (1+1)", "a worker and every server cut off", "--nodes 1 --cpus 2",
            "--strategy async --workers 1 --ps 1 --epochs 4 --batch-size 64 --checkpoint-every 100", nullptr, 1000};
  cell.fill_a = {2, 2};  // no room on host A
  run_cut_cell(cell, [](const Holding& b) { return b.workers >= 1 && b.servers >= 1; });
}
TEST_CASE("matrix: central, the link cut to a node with the server and a worker", "[matrix][netns]") {
  Cell cell{"central (2 workers)", "the server and a worker cut off", "--nodes 1 --cpus 2",
            "--strategy central --workers 2 --epochs 4 --batch-size 128 --checkpoint-every 100", nullptr};
  cell.fill_a = {2, 1};  // host A keeps room for 1 of the 3 actors
  run_cut_cell(cell, [](const Holding& b) { return b.workers >= 1 && b.servers >= 1; });
}
TEST_CASE("matrix: pipeline, the link cut to a node with two stages", "[matrix][netns]") {
  // 10 epochs, not kPipeline's 3: those train in about 2.5 s here, less than stopping the fillers and
  // noticing the cut (2 s) take, so the job often ended before the cut could fail it (no restart).
  const std::string job = "--strategy pipeline --stages 4 --microbatches 2 --hidden 128,64,32 --epochs 10 "
                          "--batch-size 128 --checkpoint-every 100";
  Cell cell{"pipeline", "two stages cut off", "--nodes 1 --cpus 2", job, nullptr};
  cell.fill_a = {2};
  run_cut_cell(cell, [](const Holding& b) { return b.workers >= 2; });
}

// ---- the servers of two jobs on the victim ----

TEST_CASE("matrix: async, the victim holds the servers of two jobs, kill -9", "[matrix]") {
  run_two_jobs_cell({"async (2 jobs)", "the servers (and workers) of two jobs", "--nodes 2 --cpus 4",
                     "--strategy async --workers 1 --ps 1 --epochs 4 --batch-size 64 --checkpoint-every 100",
                     nullptr, 1000, 4});
}

// ---- sharded data parallelism (--shard: each worker holds 1/N of the optimizer state or gradients) ----

namespace {
const std::string kShardOptimizer = kSync + " --shard optimizer";
const std::string kShardGradients = kSync + " --shard gradients";
const std::string kShardElastic = kElastic + " --shard gradients";
}  // namespace

TEST_CASE("matrix: sharded sync (optimizer), the victim holds one worker, kill -9", "[matrix][sharded]") {
  run_kill_cell({"sync --shard optimizer", "one worker", "--nodes 3 --cpus 2", kShardOptimizer, one_worker()},
                "kill -9 node");
}
TEST_CASE("matrix: sharded sync (gradients), the victim holds one worker, kill -9", "[matrix][sharded]") {
  run_kill_cell({"sync --shard gradients", "one worker", "--nodes 3 --cpus 2", kShardGradients, one_worker()},
                "kill -9 node");
}
TEST_CASE("matrix: sharded sync (gradients), the victim holds several workers, kill -9", "[matrix][sharded]") {
  run_kill_cell({"sync --shard gradients", "several workers", "--nodes 1 --cpus 4", kShardGradients,
                 several_workers()},
                "kill -9 node");
}
TEST_CASE("matrix: sharded elastic sync (gradients), the victim holds several workers, kill -9", "[matrix][sharded]") {
  // The job goes on live with the workers that fit: each rank's new share (1/k) cut from the old
  // shares and their buddies' copies in memory (trainers/sharded/mirror_recut.h).
  Cell cell{"elastic sync --shard gradients", "several workers", "--nodes 1 --cpus 4", kShardElastic,
            several_workers()};
  cell.expect_live = true;
  run_kill_cell(cell, "kill -9 node");
}
TEST_CASE("matrix: sharded elastic sync (parameters), the link cut to a node with several workers",
          "[matrix][netns][sharded]") {
  // Live: the survivors' shares of the parameters and optimizer state, and their copies of the cut
  // ranks', re-cut for the workers that fit.
  Cell cell{"elastic sync --shard parameters", "several workers cut off", "--nodes 1 --cpus 2",
            kElastic + " --shard parameters", nullptr};
  cell.fill_a = {2};  // as the elastic cell: host A keeps room for 2 of the 4 workers, B gets the other 2
  cell.expect_live = true;
  run_cut_cell(cell, [](const Holding& b) { return b.workers >= 2; });
}
TEST_CASE("matrix: sharded sync (gradients), two nodes killed at once", "[matrix][sharded]") {
  run_kill_cell({"sync --shard gradients", "two nodes with workers", "--nodes 4 --cpus 2", kShardGradients,
                 two_nodes()},
                "kill -9 two nodes");
}
TEST_CASE("matrix: sharded sync (gradients), the link to a node with a worker cut", "[matrix][netns][sharded]") {
  run_cut_cell({"sync --shard gradients", "one node's actors cut off", "--nodes 1 --cpus 2", kShardGradients, nullptr});
}
TEST_CASE("matrix: sharded sync (parameters), the victim holds one worker, kill -9", "[matrix][sharded]") {
  run_kill_cell({"sync --shard parameters", "one worker", "--nodes 3 --cpus 2", kSync + " --shard parameters",
                 one_worker()},
                "kill -9 node");
}

// ---- 2x2 pipelines (two replicas of two stages: a lost stage comes back from the other replica's
// memory; both replicas of a stage lost at once is the checkpoint, and the log says which stage) ----

namespace {
const std::string kPipeline2x2 = "--strategy pipeline --stages 2 --workers 4 --microbatches 2 --hidden 128,64,32 "
                                 "--epochs 3 --batch-size 128 --checkpoint-every 100";
}  // namespace

TEST_CASE("matrix: 2x2 pipeline, the victim holds one stage, kill -9", "[matrix][pipeline2x2]") {
  run_kill_cell({"pipeline 2x2", "one stage", "--nodes 3 --cpus 2", kPipeline2x2, one_worker()}, "kill -9 node");
}
TEST_CASE("matrix: 2x2 pipeline, the victim holds two stages, kill -9", "[matrix][pipeline2x2]") {
  run_kill_cell({"pipeline 2x2", "two stages", "--nodes 1 --cpus 4", kPipeline2x2, several_workers()},
                "kill -9 node");
}
TEST_CASE("matrix: 2x2 pipeline, two nodes killed at once", "[matrix][pipeline2x2]") {
  run_kill_cell({"pipeline 2x2", "two nodes with stages", "--nodes 4 --cpus 2", kPipeline2x2, two_nodes()},
                "kill -9 two nodes");
}
