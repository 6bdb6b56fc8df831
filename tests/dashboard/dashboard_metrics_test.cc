// GET /metrics (dashboard/prometheus.h) over HTTP against a seeded InMemoryStore: the Prometheus
// text format (HELP and TYPE before each family's samples), nodes, actors and jobs counted by state,
// per-node and per-job series with the records' values, label values escaped, the token rule of
// the API, and 503 naming the GCS when it cannot be read.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "gcs/events.h"
#include "gcs/job_recovery.h"
#include "gcs/node_stats.h"
#include "gcs/step_timeline.h"
#include "tests/dashboard/dashboard_fixture.h"

using namespace troupe;
using namespace troupe::testing;

namespace {

// name{labels} -> value of every sample line, and the families whose TYPE was declared.
struct Exposition {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
};

Exposition parse(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  std::string declared;  // the family whose TYPE came last
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      e.types[name] = type;
      declared = name;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    const std::string key = line.substr(0, space);
    const std::string family = key.substr(0, key.find('{'));
    INFO(line);
    CHECK(family == declared);  // every sample follows its own family's TYPE line
    e.samples[key] = std::stod(line.substr(space + 1));
  }
  return e;
}

std::string scrape(DashboardFixture& f, int* status, std::string* content_type, const std::string& path = "/metrics") {
  auto client = f.client();
  auto r = client->Get(path);
  REQUIRE(r);
  *status = r->status;
  *content_type = r->get_header_value("Content-Type");
  return r->body;
}

// A scrape that must succeed: its text, content type and samples.
struct Scrape {
  std::string text, type;
  Exposition e;
};
Scrape scrape_ok(DashboardFixture& f) {
  Scrape s;
  int status = 0;
  s.text = scrape(f, &status, &s.type);
  INFO(s.text);
  REQUIRE(status == 200);
  s.e = parse(s.text);
  return s;
}

}  // namespace

TEST_CASE("/metrics: the cluster in the Prometheus text format", "[dashboard][metrics]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  c.running.name = "quote\" back\\slash\nline";  // label values the format must escape
  c.running.samples_per_second = 1234.5;
  c.running.step = 77;
  REQUIRE(gcs::Table<gcs::JobRecord>(f.store()).put(c.running).ok());
  c.actors[5].restarts = 2;  // a worker of the running job, restarted twice
  REQUIRE(gcs::Table<gcs::ActorRecord>(f.store()).put(c.actors[5]).ok());
  f.start();
  const Scrape s = scrape_ok(f);
  INFO(s.text);
  CHECK(s.type.rfind("text/plain; version=0.0.4", 0) == 0);
  const Exposition& e = s.e;

  CHECK(e.samples.at("troupe_up") == 1);
  CHECK(e.samples.at("troupe_nodes{state=\"ALIVE\"}") == 2);
  CHECK(e.samples.at("troupe_nodes{state=\"DEAD\"}") == 1);
  CHECK(e.samples.at("troupe_nodes{state=\"SUSPECT\"}") == 0);
  CHECK(e.samples.at("troupe_node_up{node=\"" + c.dead.id.hex() + "\",hostname=\"host\",head=\"0\"}") == 0);
  CHECK(e.samples.at("troupe_node_up{node=\"" + c.head.id.hex() + "\",hostname=\"host\",head=\"1\"}") == 1);
  CHECK(e.samples.at("troupe_node_cpus{node=\"" + c.worker.id.hex() + "\",kind=\"total\"}") == 4);
  CHECK(e.samples.at("troupe_node_cpus{node=\"" + c.worker.id.hex() + "\",kind=\"used\"}") == 1);
  CHECK(e.samples.at("troupe_node_memory_bytes{node=\"" + c.worker.id.hex() + "\",kind=\"total\"}") ==
        static_cast<double>(int64_t{8} << 30));

  CHECK(e.samples.at("troupe_actors{state=\"ALIVE\",type=\"echo\"}") == 3);
  CHECK(e.samples.at("troupe_actors{state=\"DEAD\",type=\"counter\"}") == 1);
  CHECK(e.samples.at("troupe_actors{state=\"PENDING\",type=\"echo\"}") == 1);
  CHECK(e.samples.at("troupe_actors{state=\"ALIVE\",type=\"troupe.worker\"}") == 2);
  CHECK(e.samples.at("troupe_actor_restarts_total{type=\"troupe.worker\"}") == 2);
  CHECK(e.types.at("troupe_actor_restarts_total") == "counter");
  CHECK(e.types.at("troupe_nodes") == "gauge");

  CHECK(e.samples.at("troupe_jobs{state=\"RUNNING\",strategy=\"sync\"}") == 1);
  CHECK(e.samples.at("troupe_jobs{state=\"SUCCEEDED\",strategy=\"sync\"}") == 1);
  const std::string job = "{job_id=\"" + c.running.id.hex() + "\"}";
  CHECK(e.samples.at("troupe_job_samples_per_second" + job) == 1234.5);
  CHECK(e.samples.at("troupe_job_step" + job) == 77);
  CHECK(e.samples.at("troupe_job_progress" + job) == 0.25);
  CHECK(e.samples.at("troupe_job_restarts_total" + job) == 2);
  CHECK(e.samples.at("troupe_job_restarts_total{job_id=\"" + c.done.id.hex() + "\"}") == 0);
  CHECK(e.samples.count("troupe_job_info{job_id=\"" + c.running.id.hex() +
                        "\",name=\"quote\\\" back\\\\slash\\nline\",strategy=\"sync\",state=\"RUNNING\"}") == 1);
  CHECK(e.samples.count("troupe_gcs_read_seconds") == 1);
}

TEST_CASE("/metrics: every live node process's own CPU time, memory, descriptors, sockets and threads",
          "[dashboard][metrics]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  const int64_t now = gcs::now_ms();
  REQUIRE(gcs::put_node_stats(f.store(), {c.worker.id.hex(), now - 2000, 12.5, 300 << 20, 41, 7, 23}).ok());
  REQUIRE(gcs::put_node_stats(f.store(), {c.dead.id.hex(), now - 60000, 3, 100 << 20, 10, 2, 5}).ok());
  f.start();
  const Scrape s = scrape_ok(f);
  INFO(s.text);
  const Exposition& e = s.e;
  const std::string node = "{node=\"" + c.worker.id.hex() + "\"}";
  CHECK(e.samples.at("troupe_node_process_cpu_seconds_total" + node) == 12.5);
  CHECK(e.types.at("troupe_node_process_cpu_seconds_total") == "counter");
  CHECK(e.samples.at("troupe_node_process_resident_bytes" + node) == 300 << 20);
  CHECK(e.samples.at("troupe_node_process_open_fds" + node) == 41);
  CHECK(e.samples.at("troupe_node_process_sockets" + node) == 7);
  CHECK(e.samples.at("troupe_node_process_threads" + node) == 23);
  CHECK(e.samples.at("troupe_node_process_stats_age_seconds" + node) == Approx(2).margin(1));
  // A dead node's last figures are stale: left out.
  CHECK(e.samples.count("troupe_node_process_resident_bytes{node=\"" + c.dead.id.hex() + "\"}") == 0);
  CHECK(e.samples.at("troupe_node_process_stats_unreadable") == 0);
}

TEST_CASE("/metrics: a running job's workers by phase of their newest steps, all-reduce time and bytes, rate and last step",
          "[dashboard][metrics]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  c.running.workers = 3;
  REQUIRE(gcs::Table<gcs::JobRecord>(f.store()).put(c.running).ok());
  const std::string job = c.running.id.hex();
  // Worker 0: 100 steps of 10 ms (data 1, compute 6, communication 2, optimizer 1; 4 ms of
  // all-reduce on the comm thread), 32 examples each: the series average the newest 64.
  std::vector<gcs::StepSample> steps;
  for (int i = 0; i < 100; ++i) {
    gcs::StepSample s;
    s.epoch = 1;
    s.step = i + 1;
    s.start_us = 1'000'000 + i * 10'000;
    s.data_us = i < 36 ? 5000 : 1000;  // the old steps differ: they must not count
    s.compute_us = 6000;
    s.comm_us = 2000;
    s.optimizer_us = 1000;
    s.comm_busy_us = 4000;
    s.samples = 32;
    s.comm_bytes = 470'000;  // the mlp's gradients on a bf16 wire
    steps.push_back(s);
  }
  REQUIRE(gcs::append_steps(f.store(), job, 0, steps).ok());
  // Worker 1: a timeline that does not decode; worker 2 none yet.
  REQUIRE(f.store().append(gcs::timeline_stream(job, 1), "not msgpack", gcs::kTimelineChunks).ok());
  f.start();
  const Scrape s = scrape_ok(f);
  INFO(s.text);
  const Exposition& e = s.e;
  const std::string w0 = "job_id=\"" + job + "\",worker=\"0\"";
  CHECK(e.samples.at("troupe_worker_step_seconds{" + w0 + ",phase=\"data_wait\"}") == Approx(0.001));
  CHECK(e.samples.at("troupe_worker_step_seconds{" + w0 + ",phase=\"compute\"}") == Approx(0.006));
  CHECK(e.samples.at("troupe_worker_step_seconds{" + w0 + ",phase=\"communication\"}") == Approx(0.002));
  CHECK(e.samples.at("troupe_worker_step_seconds{" + w0 + ",phase=\"optimizer\"}") == Approx(0.001));
  CHECK(e.samples.at("troupe_worker_allreduce_seconds{" + w0 + "}") == Approx(0.004));
  CHECK(e.samples.at("troupe_worker_allreduce_bytes_per_step{" + w0 + "}") == Approx(470000));
  CHECK(e.samples.at("troupe_worker_allreduce_bytes_per_second{" + w0 + "}") == Approx(47e6).epsilon(0.02));
  CHECK(e.samples.at("troupe_worker_samples_per_second{" + w0 + "}") == Approx(3200).epsilon(0.02));
  CHECK(e.samples.at("troupe_worker_last_step{" + w0 + "}") == 100);
  CHECK(e.samples.at("troupe_worker_timelines_unreadable") == 1);  // worker 1's, and the scrape still answered
  CHECK(e.samples.count("troupe_worker_last_step{job_id=\"" + job + "\",worker=\"2\"}") == 0);
  CHECK(e.samples.count("troupe_worker_last_step{job_id=\"" + c.done.id.hex() + "\",worker=\"0\"}") == 0);
}

TEST_CASE("/metrics: a job's last failure's detection and resume times", "[dashboard][metrics]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  // The running job lost a node whose last heartbeat was 1.5 s before the supervisor restarted it,
  // and trained again 0.75 s later; the finished one restarted but never reported its resume.
  REQUIRE(gcs::note_restart(f.store(), c.running.id, 1, "its node died", 10000, 11500).ok());
  REQUIRE(gcs::note_resumed_at(f.store(), c.running.id, 1, 12250).ok());
  REQUIRE(gcs::note_resumed_at(f.store(), c.running.id, 1, 99999).ok());  // the first resume counts
  REQUIRE(gcs::note_restart(f.store(), c.done.id, 1, "a worker threw", 5000, 5000).ok());
  REQUIRE(gcs::note_resumed_at(f.store(), c.done.id, 2, 6000).ok());      // another attempt's: ignored
  f.start();
  const Scrape s = scrape_ok(f);
  INFO(s.text);
  const std::string running = "{job_id=\"" + c.running.id.hex() + "\"}";
  const std::string done = "{job_id=\"" + c.done.id.hex() + "\"}";
  CHECK(s.e.samples.at("troupe_job_failure_detection_seconds" + running) == Approx(1.5));
  CHECK(s.e.samples.at("troupe_job_resume_seconds" + running) == Approx(0.75));
  CHECK(s.e.samples.at("troupe_job_failure_detection_seconds" + done) == 0);
  CHECK(s.e.samples.count("troupe_job_resume_seconds" + done) == 0);
  auto rec = gcs::job_recovery(f.store(), c.running.id);
  REQUIRE(rec.ok());
  REQUIRE(rec->has_value());
  CHECK((*rec)->restarts == 1);
  CHECK((*rec)->cause == "its node died");
}

TEST_CASE("/metrics keeps the API's token rule, and a GCS that does not answer is a 503 naming it",
          "[dashboard][metrics]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start([](dashboard::DashboardOptions& o) { o.auth = dashboard::DashboardOptions::Auth::always; });
  int status = 0;
  std::string type;
  scrape(f, &status, &type);
  CHECK(status == 401);
  const std::string text = scrape(f, &status, &type, "/metrics?token=secret-token");
  CHECK(status == 200);
  CHECK(text.find("troupe_up 1") != std::string::npos);
  f.store().set_down(true);
  const std::string down = scrape(f, &status, &type, "/metrics?token=secret-token");
  CHECK(status == 503);
  CHECK(down.find("the GCS did not answer") != std::string::npos);
}

TEST_CASE("examples/monitoring: the Grafana dashboard asks only for metrics /metrics serves, the Prometheus config "
          "scrapes /metrics", "[dashboard][metrics]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start();
  const Exposition served = scrape_ok(f).e;
  std::set<std::string> families;
  for (const auto& [name, kind] : served.types) families.insert(name);

  std::ifstream in(TROUPE_SOURCE_DIR "/examples/monitoring/grafana-dashboard.json");
  REQUIRE(in);
  const Json dashboard = Json::parse(in);
  int queries = 0;
  const std::regex metric(R"(troupe_[a-z_]+)");
  for (const Json& panel : dashboard.at("panels")) {
    for (const Json& target : panel.at("targets")) {
      const std::string expr = target.at("expr");
      ++queries;
      for (auto m = std::sregex_iterator(expr.begin(), expr.end(), metric); m != std::sregex_iterator(); ++m) {
        INFO(panel.at("title") << ": " << expr);
        CHECK(families.count(m->str()) == 1);
      }
    }
  }
  CHECK(queries >= 10);
  std::ifstream config(TROUPE_SOURCE_DIR "/examples/monitoring/prometheus.yml");
  std::stringstream text;
  text << config.rdbuf();
  CHECK(text.str().find("metrics_path: /metrics") != std::string::npos);
}
