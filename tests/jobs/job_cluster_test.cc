// Whole training jobs on a real local cluster (embedded redis-server, a head and a node process),
// driven through `troupe submit`, `troupe status --json` and `troupe stop` as a user would.
#include <catch2/catch.hpp>

#include <set>

#include <string>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

namespace {

// The job of `status --json` whose id starts with `id`, or null.
Json find_job(const Json& view, const std::string& id) {
  for (const Json& j : view.at("jobs")) {
    if (j.at("id").get<std::string>().rfind(id, 0) == 0) return j;
  }
  return Json();
}

std::string job_state(ClusterFixture& c, const std::string& id) {
  Json view = c.try_status();
  if (view.is_null()) return "";
  Json j = find_job(view, id);
  return j.is_null() ? "" : j.at("state").get<std::string>();
}

// A cluster of 8 cpus: the head and one node, 4 cpus each (more than this machine's cores: cpus
// are what the scheduler accounts, and 4 workers + 2 parameter servers must fit).
void up_two_nodes(ClusterFixture& c) { c.up("--nodes 1 --cpus 4"); }

}  // namespace

TEST_CASE("submit: a sync job of 4 workers trains Fashion-MNIST to >= 0.885 and reports per worker",
          "[jobs][cluster][sync]") {
  ClusterFixture c;
  up_two_nodes(c);
  auto r = c.troupe("submit --strategy sync --workers 4 --epochs 10 --batch-size 128 --json --no-progress", 300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json summary = Json::parse(r.last_line());
  CHECK(summary.at("strategy") == "sync");
  CHECK(summary.at("workers") == 4);
  CHECK(summary.at("epochs") == 10);
  CHECK(summary.at("steps") == 10 * (60000 / 128));
  CHECK(summary.at("test_accuracy").get<double>() >= 0.885);
  REQUIRE(summary.at("worker_samples_per_second").size() == 4u);
  for (const Json& rate : summary.at("worker_samples_per_second")) CHECK(rate.get<double>() > 0);

  // The cluster agrees: the job SUCCEEDED with its 4 actors, which all exited normally.
  Json view = c.status(50);
  Json job = find_job(view, summary.at("job_id").get<std::string>());
  REQUIRE_FALSE(job.is_null());
  CHECK(job.at("state") == "SUCCEEDED");
  CHECK(job.at("progress").get<double>() == 1.0);
  CHECK(job.at("result").at("test_accuracy") == summary.at("test_accuracy"));
  REQUIRE(job.at("actors").size() == 4u);
  int exited = 0;
  for (const Json& a : view.at("actors")) {
    if (a.at("job") != job.at("id")) continue;
    CHECK(a.at("state") == "FINISHED");  // ended without failing
    CHECK(a.at("death_reason").get<std::string>().find("exited normally") != std::string::npos);
    ++exited;
  }
  CHECK(exited == 4);

  // `troupe logs JOB` gathers what every process logged about the job.
  auto logs = c.troupe("logs " + summary.at("job_id").get<std::string>().substr(0, 8));
  INFO(logs.both());
  CHECK(logs.exit_code == 0);
  for (int r = 0; r < 4; ++r) CHECK(logs.out.find("worker " + std::to_string(r) + ": sync training mlp") != std::string::npos);
}

TEST_CASE("submit: sync workers on one node all-reduce their gradients in place, in the shared-memory arena",
          "[jobs][cluster][sync]") {
  ClusterFixture c;
  c.up("--nodes 0 --cpus 2");  // the head alone: both workers on one node
  auto r = c.troupe("submit --strategy sync --workers 2 --epochs 1 --json --no-progress", 300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json summary = Json::parse(r.last_line());
  CHECK(summary.at("transport") == "shm");
  CHECK(summary.at("gradients_in_arena") == true);
  CHECK(summary.at("test_accuracy").get<double>() >= 0.8);  // about 0.84 after one epoch
}

TEST_CASE("submit: an async job (4 workers, 2 parameter servers) trains to >= 0.885 and records staleness",
          "[jobs][cluster][async]") {
  ClusterFixture c;
  up_two_nodes(c);
  // Each worker's 32 rows a step in 4 micro-batches; its epochs end on short batches (shards of
  // 3750 rows: 6, 12, ... rows left) that 4 does not always divide.
  auto r = c.troupe("submit --strategy async --workers 4 --ps 2 --accumulate 4 --epochs 10 --batch-size 128 --json "
                    "--no-progress", 600);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json summary = Json::parse(r.last_line());
  CHECK(summary.at("strategy") == "async");
  CHECK(summary.at("accumulate") == 4);
  CHECK(summary.at("parameter_servers") == 2);
  CHECK(summary.at("test_accuracy").get<double>() >= 0.885);
  // Every update the servers applied has its staleness recorded: about one per worker step.
  const Json& st = summary.at("staleness");
  CHECK(st.at("updates").get<int64_t>() >= 10 * (60000 / 32) * 9 / 10);  // 10 epochs of 32-example steps
  CHECK(st.at("max").get<int64_t>() >= 0);
  REQUIRE(summary.at("worker_samples_per_second").size() == 4u);
  // The servers were stopped once the workers were done: nothing of the job is left running. (submit
  // returns once rank 0 recorded SUCCEEDED, before the workers' exits reach the head and it stops the
  // servers: their FINISHED records follow within moments.)
  Json view;
  poll_until([&] {
    view = c.status(50);
    for (const Json& a : view.at("actors"))
      if (a.at("job") == summary.at("job_id") && a.at("state") != "FINISHED") return false;
    return true;
  }, std::chrono::seconds(15), std::chrono::milliseconds(100));
  int servers = 0;
  for (const Json& a : view.at("actors")) {
    if (a.at("job") != summary.at("job_id")) continue;
    CHECK(a.at("state") == "FINISHED");  // workers returned, servers stopped: none failed
    if (a.at("type") == "troupe.ps") ++servers;
  }
  CHECK(servers == 2);
  // Every example of every ledger shard applied exactly once on both servers, proven from the GCS
  // (recorded as the workers were done, before the servers were stopped).
  std::string accounting;
  for (const Json& e : view.at("events")) {
    const std::string kind = e.at("kind");
    if (e.value("subject", "") == summary.at("job_id") && (kind == "data_accounted" || kind == "data_accounting_failed"))
      accounting = kind + ": " + e.at("message").get<std::string>();
  }
  INFO(accounting);
  CHECK(accounting.find("data_accounted: ") == 0);
  CHECK(accounting.find("on each of 2 parameter server(s)") != std::string::npos);
  CHECK(accounting.find("trained exactly once") != std::string::npos);
  // Every worker's step timeline was recorded: its steps' pull and push, and that it finished.
  const std::string id = summary.at("job_id");
  auto timeline = c.troupe("timeline " + id.substr(0, 8) + " --summary", 60);
  INFO(timeline.both());
  REQUIRE(timeline.exit_code == 0);
  Json t = Json::parse(timeline.out);
  CHECK(t.at("strategy") == "async");
  CHECK(t.at("phases")[1].at("name") == "pull");
  CHECK(t.at("phases")[3].at("name") == "push");
  REQUIRE(t.at("workers").size() == 4u);
  for (const Json& w : t.at("workers")) {
    INFO("worker " << w.at("rank"));
    CHECK(w.at("summary").at("steps").get<int64_t>() > 0);
    CHECK(w.at("summary").at("mean_compute_ms").get<double>() > 0);
    REQUIRE(w.at("live").is_object());
    CHECK(w.at("live").at("phase") == "done");
  }
}

TEST_CASE("submit: a central job (variables on one actor, 4 workers, each step in 2 micro-batches) trains to >= 0.885",
          "[jobs][cluster][central][accumulate]") {
  ClusterFixture c;
  up_two_nodes(c);
  auto r = c.troupe("submit --strategy central --workers 4 --accumulate 2 --epochs 10 --batch-size 128 --json "
                    "--no-progress", 300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json summary = Json::parse(r.last_line());
  CHECK(summary.at("strategy") == "central");
  CHECK(summary.at("accumulate") == 2);
  CHECK(summary.at("parameter_servers") == 1);
  CHECK(summary.at("staleness").at("max") == 0);  // every step's gradients averaged, then applied once
  CHECK(summary.at("test_accuracy").get<double>() >= 0.885);
  // The server recorded its versions as trained steps: every shard of every epoch trained once,
  // proven from the GCS when the workers were done.
  std::string accounting;
  REQUIRE(poll_until([&] {
    Json view = c.try_status(100);
    if (view.is_null()) return false;
    for (const Json& e : view.at("events")) {
      const std::string kind = e.at("kind");
      if (e.value("subject", "") == summary.at("job_id") && (kind == "data_accounted" || kind == "data_accounting_failed"))
        accounting = kind + ": " + e.at("message").get<std::string>();
    }
    return !accounting.empty();
  }, std::chrono::seconds(30)));
  INFO(accounting);
  CHECK(accounting.find("data_accounted: ") == 0);
  CHECK(accounting.find("every shard of epochs 1-10 trained exactly once") != std::string::npos);
}

TEST_CASE("submit: sync workers train in f16 with loss scaling, f16 gradients on the wire, and report it",
          "[jobs][cluster][precision]") {
  ClusterFixture c;
  up_two_nodes(c);
  // Over TCP (the transport of workers on different hosts), where auto sends f16 gradients.
  auto r = c.troupe("submit --strategy sync --workers 2 --epochs 2 --precision f16 --transport tcp --json --no-progress",
                    300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json summary = Json::parse(r.last_line());
  CHECK(summary.at("precision") == "f16");
  CHECK(summary.at("transport") == "tcp");
  CHECK(summary.at("grad_wire") == "f16");  // auto over sockets: the gradients are f16 already
  CHECK(summary.at("loss_scale").get<double>() >= 1.0);     // the scaler ran on the workers
  CHECK(summary.at("overflow_steps").get<int64_t>() < 50);
  CHECK(summary.at("test_accuracy").get<double>() >= 0.85);  // f32 reaches about 0.866 in 2 epochs
}

TEST_CASE("submit: sync workers shard their optimizer state, gradients or parameters (--shard) and report what they "
          "held", "[jobs][cluster][sharded]") {
  ClusterFixture c;
  up_two_nodes(c);
  const double plain_bytes = 16.0 * 235146;  // mlp 784-256-128-10: parameters, gradients, adam's moments
  for (const std::string stage : {"gradients", "parameters"}) {
    auto r = c.troupe("submit --strategy sync --workers 2 --epochs 2 --optimizer adam --lr 0.001 --shard " + stage +
                          " --json --no-progress",
                      300);
    INFO(stage << ": " << r.both() << c.logs_tail());
    REQUIRE(r.exit_code == 0);
    Json summary = Json::parse(r.last_line());
    CHECK(summary.at("shard") == stage);
    CHECK(summary.at("test_accuracy").get<double>() >= 0.85);
    const double held = summary.at("sharded_state_bytes").get<double>();
    CHECK(held > 0);
    // Less than plain sync holds, even for this model, whose first matrix is 85% of it (sharding
    // pays with many layers: tests/models/gpt_sharded_test.cc holds it to the ZeRO formulas).
    CHECK(held < 0.9 * plain_bytes);
  }
}

TEST_CASE("submit: a user's trainer library from examples/ is shipped to the workers and trained",
          "[jobs][cluster][library]") {
  ClusterFixture c;
  up_two_nodes(c);
  const std::string lib = std::string(TROUPE_USER_TRAINER_DIR) + "/cmake/libuser_trainer.so";
  auto r = c.troupe("submit --lib " + lib + " --trainer logreg --workers 2 --epochs 1 --json --no-progress", 300);
  INFO(r.both() << c.logs_tail());
  REQUIRE(r.exit_code == 0);
  Json summary = Json::parse(r.last_line());
  CHECK(summary.at("model").get<std::string>().rfind("logreg", 0) == 0);
  CHECK(summary.at("workers") == 2);
  CHECK(summary.at("test_accuracy").get<double>() > 0.75);  // logistic regression, one epoch
}

TEST_CASE("submit: bad jobs are refused with a clear error before anything runs", "[jobs][cluster][errors]") {
  ClusterFixture c;
  up_two_nodes(c);
  auto unknown = c.troupe("submit --trainer no-such-model --workers 2 --no-progress");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("--model 'no-such-model' is not a known trainer") != std::string::npos);

  auto missing = c.troupe("submit --lib /nonexistent/libmine.so --trainer mine --workers 2 --no-progress");
  CHECK(missing.exit_code != 0);
  CHECK(missing.err.find("/nonexistent/libmine.so") != std::string::npos);

  auto other = c.troupe("submit --lib " + std::string(TROUPE_TEST_FIXTURE_DIR) +
                        "/libtest_other_version_trainer.so --trainer old --workers 2 --no-progress");
  CHECK(other.exit_code != 0);
  CHECK(other.err.find("rebuild it against this version") != std::string::npos);

  auto too_many = c.troupe("submit --workers 16 --no-progress");
  CHECK(too_many.exit_code == 2);
  CHECK(too_many.err.find("16 workers need 16 cpus; the cluster has 8 on 2 alive node(s)") != std::string::npos);

  auto indivisible = c.troupe("submit --workers 3 --batch-size 128 --no-progress");
  CHECK(indivisible.exit_code == 2);
  CHECK(indivisible.err.find("--batch-size 128 (the global batch) does not divide among 3 workers") !=
        std::string::npos);

  auto unscaled = c.troupe("submit --strategy async --ps 1 --workers 2 --precision f16 --no-progress");
  CHECK(unscaled.exit_code == 2);
  CHECK(unscaled.err.find("--precision f16 needs dynamic loss scaling") != std::string::npos);

  // None of them left a job behind.
  CHECK(c.status().at("jobs").empty());
}

TEST_CASE("submit: a worker that fails fails the job, naming the worker and the cause", "[jobs][cluster][errors]") {
  ClusterFixture c;
  up_two_nodes(c);
  auto r = c.troupe("submit --workers 2 --trainer-arg hidden=lots --epochs 1 --no-progress", 120);
  INFO(r.both() << c.logs_tail());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("FAILED") != std::string::npos);
  CHECK(r.err.find("worker") != std::string::npos);
  CHECK(r.err.find("hidden") != std::string::npos);
}

TEST_CASE("submit: a job waits PENDING for resources, starts when they free up, and troupe stop cancels it",
          "[jobs][cluster][pending]") {
  ClusterFixture c;
  up_two_nodes(c);
  // A takes all 8 cpus for a long while; B (2 workers) must wait for it.
  auto a = c.troupe("submit --workers 8 --epochs 50 --detach --no-progress");
  INFO(a.both());
  REQUIRE(a.exit_code == 0);
  const std::string job_a = a.last_line();
  REQUIRE(poll_until([&] { return job_state(c, job_a) == "RUNNING"; }, std::chrono::seconds(30)));
  auto b = c.troupe("submit --workers 2 --epochs 1 --detach --no-progress");
  REQUIRE(b.exit_code == 0);
  const std::string job_b = b.last_line();
  Json pending = find_job(c.status(), job_b);
  REQUIRE_FALSE(pending.is_null());
  CHECK(pending.at("state") == "PENDING");
  CHECK(pending.at("message").get<std::string>().find("waiting for resources") != std::string::npos);

  auto stop = c.troupe("stop " + job_a.substr(0, 8));
  INFO(stop.both() << c.logs_tail());
  REQUIRE(stop.exit_code == 0);
  CHECK(stop.out.find("CANCELLED") != std::string::npos);
  CHECK(job_state(c, job_a) == "CANCELLED");
  // A's actors end and give their cpus back; B is placed and runs to the end.
  REQUIRE(poll_until([&] { std::string s = job_state(c, job_b); return s == "RUNNING" || s == "SUCCEEDED"; },
                     std::chrono::seconds(30)));
  REQUIRE(poll_until([&] { return job_state(c, job_b) == "SUCCEEDED"; }, std::chrono::seconds(120)));
  Json view = c.status(50);
  for (const Json& actor : view.at("actors")) {
    // Ended: stopped (FINISHED), or failed first in a collective a stopped peer left (DEAD).
    if (actor.at("job").get<std::string>().rfind(job_a, 0) == 0)
      CHECK((actor.at("state") == "FINISHED" || actor.at("state") == "DEAD"));
  }
  auto unknown = c.troupe("stop 0123abcd");
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("no job or actor 0123abcd") != std::string::npos);  // stop takes either id
}

TEST_CASE("submit: GPU workers get devices of their own, and without a usable GPU the job fails saying so",
          "[jobs][cluster][gpus]") {
  {
    ClusterFixture c;
    c.up("--nodes 0 --cpus 4");  // no GPUs offered: refused before anything is placed
    auto none = c.troupe("submit --strategy sync --workers 2 --gpus-per-worker 1 --no-progress", 60);
    INFO(none.both());
    CHECK(none.exit_code == 2);
    CHECK(none.err.find("need 2 gpus; the cluster has 0") != std::string::npos);
  }
  // Two GPUs offered (`--gpus 2` on a machine with none: the scheduler's view only). Each worker is
  // handed a device of its own; training on it fails, naming the GPU, and the job fails with that.
  ClusterFixture g;
  g.up("--nodes 0 --cpus 4 --gpus 2");
  auto r = g.troupe("submit --strategy sync --workers 2 --gpus-per-worker 1 --max-restarts 0 --epochs 1 --json "
                    "--no-progress", 180);
  INFO(r.both() << g.logs_tail());
  if (r.exit_code == 0) {
    WARN("a GPU is usable here: the job trained on it");
    CHECK(Json::parse(r.last_line()).at("device").get<std::string>().rfind("cuda:", 0) == 0);
    return;
  }
  CHECK(r.both().find("GPU") != std::string::npos);
  const Json view = g.status();
  std::set<std::vector<int>> devices;
  for (const Json& a : view.at("actors"))
    if (a.at("type") == "troupe.worker") devices.insert(a.at("gpu_ids").get<std::vector<int>>());
  CHECK(devices == std::set<std::vector<int>>{{0}, {1}});
}

TEST_CASE("submit: an async job's GPU workers get devices of their own, its servers none, and without a usable "
          "GPU the job fails saying so",
          "[jobs][cluster][gpus][async]") {
  // Two GPUs offered on a machine with none (the scheduler's view only): each worker is handed a
  // device, connects to the parameter server, and fails setting the device up, naming it.
  ClusterFixture g;
  g.up("--nodes 0 --cpus 4 --gpus 2");
  auto r = g.troupe("submit --strategy async --workers 2 --ps 1 --gpus-per-worker 1 --max-restarts 0 --epochs 1 "
                    "--json --no-progress", 180);
  INFO(r.both() << g.logs_tail());
  if (r.exit_code == 0) {
    WARN("a GPU is usable here: the async job trained on it");
    const Json summary = Json::parse(r.last_line());
    CHECK(summary.at("device").get<std::string>().rfind("cuda:", 0) == 0);
    CHECK(summary.at("strategy") == "async");
    return;
  }
  const std::string out = r.both();
  const bool named = out.find("on GPU ") != std::string::npos && out.find("no CUDA device is visible") != std::string::npos;
  CHECK((named || out.find("async GPU workers: this troupe was built without CUDA") != std::string::npos));
  const Json view = g.status();
  std::set<std::vector<int>> devices;
  int servers = 0;
  for (const Json& a : view.at("actors")) {
    if (a.at("type") == "troupe.worker") devices.insert(a.at("gpu_ids").get<std::vector<int>>());
    if (a.at("type") == "troupe.ps") {
      ++servers;
      CHECK(a.at("gpu_ids").get<std::vector<int>>().empty());
    }
  }
  CHECK(devices == std::set<std::vector<int>>{{0}, {1}});
  CHECK(servers == 1);
}
