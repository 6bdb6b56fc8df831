// The dashboard of a real cluster (`troupe up` through ClusterFixture): the URL `troupe up` prints
// serves the same nodes, actors and jobs as `troupe status --json`, and a node killed with SIGKILL
// shows DEAD through the API within the failure detector's bound; Debian's Prometheus scrapes the
// head's /metrics and finds a job's samples/s and a killed node down.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <httplib.h>

#include "tests/cluster/cluster_fixture.h"
#include "tests/dashboard/dashboard_url.h"

using namespace troupe::testing;

namespace {

// id -> state of every entry of one section of a cluster document.
std::map<std::string, std::string> states_of(const Json& view, const char* section) {
  std::map<std::string, std::string> out;
  for (const Json& x : view.at(section)) out[x.at("id")] = x.at("state");
  return out;
}

}  // namespace

TEST_CASE("the dashboard troupe up prints agrees with troupe status and sees a killed node DEAD", "[cluster]") {
  ClusterFixture c;
  auto up = c.up("--nodes 1 --cpus 2");
  const DashboardUrl url = dashboard_url(up.out);
  CHECK(url.host == "127.0.0.1");
  auto spawn = c.troupe("spawn echo --count 6 --policy spread --json", 60);
  INFO(spawn.both());
  REQUIRE(spawn.exit_code == 0);

  // The same nodes, actors and jobs, in the same states (nothing moves between the two reads: the
  // actors are started and the nodes heartbeat without changing state).
  const Json status = c.status();
  const Json api = get_json(url, "/api/cluster");
  for (const char* section : {"nodes", "actors", "jobs"}) {
    INFO(section << "\nstatus: " << status.at(section).dump() << "\napi: " << api.at(section).dump());
    CHECK(states_of(api, section) == states_of(status, section));
  }
  CHECK(api.at("nodes").size() == 2);
  CHECK(api.at("actors").size() == 6);
  CHECK(status.at("cluster").at("dashboard") == "http://" + url.host + ":" + std::to_string(url.port));

  // The page is there too.
  httplib::Client client(url.host, url.port);
  auto page = client.Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->body.find("troupe dashboard") != std::string::npos);

  // kill -9 the node: DEAD through the API within the detection bound.
  const pid_t victim = c.pid_of("node-1");
  REQUIRE(victim > 0);
  std::string victim_id;
  for (const Json& n : api.at("nodes")) {
    if (n.at("pid").get<int64_t>() == victim) victim_id = n.at("id");
  }
  REQUIRE(!victim_id.empty());
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const auto killed_at = Clock::now();
  Json node;
  const bool dead = poll_until(
      [&] {
        node = get_json(url, "/api/nodes/" + victim_id).at("node");
        return node.at("state") == "DEAD";
      },
      kNodeDeadAfter + kDetectionSlack, std::chrono::milliseconds(50));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
  INFO("after " << ms << " ms: " << node.dump() << c.logs_tail());
  REQUIRE(dead);
  CHECK(!node.at("death_reason").get<std::string>().empty());
  // And the two views still agree once the sweep of its actors is written.
  REQUIRE(poll_until(
      [&] {
        const Json s = c.status();
        const Json a = get_json(url, "/api/cluster");
        return states_of(s, "nodes") == states_of(a, "nodes") && states_of(s, "actors") == states_of(a, "actors");
      },
      std::chrono::seconds(5), std::chrono::milliseconds(200)));
}

TEST_CASE("dashboard_port -1 turns the dashboard off and troupe up says so", "[cluster]") {
  ClusterFixture c;
  auto up = c.troupe("up --nodes 0", 90, "TROUPE_DASHBOARD_PORT=-1");
  INFO(up.both() << c.logs_tail());
  REQUIRE(up.exit_code == 0);
  CHECK(up.out.find("dashboard:  off") != std::string::npos);
}

namespace {

// One instant query to the Prometheus HTTP API at `port`: the result vector (empty on any error).
Json prometheus_query(int port, const std::string& query) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  auto r = client.Get("/api/v1/query", httplib::Params{{"query", query}}, httplib::Headers{});
  if (!r || r->status != 200) return Json::array();
  Json j = Json::parse(r->body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return Json::array();
  return j.at("data").at("result");
}

// The value of the first sample of a query's result, or NaN.
double first_value(const Json& result) {
  if (!result.is_array() || result.empty()) return std::nan("");
  return std::stod(result.at(0).at("value").at(1).get<std::string>());
}

// Starts Debian's prometheus on a free loopback port with `scrape_configs` (YAML list entries),
// scraping every second, its storage and log in `dir`; tracked by `c`. Returns its port.
int start_prometheus(ClusterFixture& c, const std::string& dir, const std::string& scrape_configs) {
  const int port = free_loopback_port();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                                         << scrape_configs;
  auto started = run_command("prometheus --config.file=" + dir + "/prometheus.yml --storage.tsdb.path=" + dir +
                             "/data --web.listen-address=127.0.0.1:" + std::to_string(port) + " > " + dir +
                             "/prometheus.log 2>&1 & echo $!");
  INFO(started.both());
  REQUIRE(started.exit_code == 0);
  c.track(static_cast<pid_t>(std::stol(started.last_line())));
  return port;
}

// The end of prometheus's log in `dir`.
std::string prometheus_log(const std::string& dir) {
  const std::string all = slurp(dir + "/prometheus.log");
  return all.size() > 4000 ? all.substr(all.size() - 4000) : all;
}

}  // namespace

TEST_CASE("Debian's Prometheus scrapes the head's /metrics: a job's samples/s and step-time split, a node process's memory, and a killed node down",
          "[cluster][prometheus]") {
  if (!std::filesystem::exists("/usr/bin/prometheus")) {
    WARN("SKIPPED: /usr/bin/prometheus is not installed (Debian's `prometheus` package; scripts/install-deps.sh "
         "installs it)");
    return;
  }
  ClusterFixture c;
  auto up = c.up("--nodes 1 --cpus 2");
  const DashboardUrl url = dashboard_url(up.out);
  // Prometheus on a free port, scraping the head every second (its storage in the test's home).
  const std::string dir = c.home() + "/prometheus";
  const int port = start_prometheus(c, dir, "  - job_name: troupe\n    metrics_path: /metrics\n    static_configs:\n"
                                            "      - targets: ['" + url.host + ":" + std::to_string(url.port) + "']\n");
  auto log = [&] { return prometheus_log(dir); };
  // Its own view of the target: up{job="troupe"} = 1 once a scrape succeeded.
  REQUIRE(poll_until([&] { return first_value(prometheus_query(port, "up{job=\"troupe\"}")) == 1; },
                     std::chrono::seconds(60)));
  INFO(log());

  // A job: its samples/s reaches Prometheus, labelled by its id.
  auto job = c.troupe("submit --workers 1 --epochs 2 --batch-size 128 --json --no-progress", 180);
  INFO(job.both());
  REQUIRE(job.exit_code == 0);
  const std::string id = Json::parse(job.last_line()).at("job_id");
  double rate = 0;
  CHECK(poll_until([&] {
    rate = first_value(prometheus_query(port, "troupe_job_samples_per_second{job_id=\"" + id + "\"}"));
    return rate > 0;
  }, std::chrono::seconds(30)));
  CHECK(poll_until([&] {  // the next scrape after the job ended
    return first_value(prometheus_query(port, "troupe_job_info{job_id=\"" + id + "\",state=\"SUCCEEDED\"}")) == 1;
  }, std::chrono::seconds(30)));
  // Its worker's step-time split while it ran (series of running jobs: over the last 5 minutes).
  const std::string worker = "{job_id=\"" + id + "\",worker=\"0\"";
  const double compute =
      first_value(prometheus_query(port, "max_over_time(troupe_worker_step_seconds" + worker + ",phase=\"compute\"}[5m])"));
  const double last_step = first_value(prometheus_query(port, "max_over_time(troupe_worker_last_step" + worker + "}[5m])"));
  INFO("worker 0's compute per step " << compute << " s, its last step seen " << last_step);
  CHECK(compute > 0);
  CHECK(compute < 1);  // the MLP's step at batch 128 is milliseconds
  CHECK(last_step > 0);
  CHECK(first_value(prometheus_query(port, "troupe_nodes{state=\"ALIVE\"}")) == 2);

  // kill -9 the node: down (0) in Prometheus within the detection bound and a scrape or two.
  const Json status = c.status();
  const pid_t victim = c.pid_of("node-1");
  REQUIRE(victim > 0);
  std::string victim_id;
  for (const Json& n : status.at("nodes"))
    if (n.at("pid").get<int64_t>() == victim) victim_id = n.at("id");
  REQUIRE_FALSE(victim_id.empty());
  REQUIRE(first_value(prometheus_query(port, "troupe_node_up{node=\"" + victim_id + "\"}")) == 1);
  // The node process's own figures reached Prometheus through the head's one target.
  const double rss = first_value(prometheus_query(port, "troupe_node_process_resident_bytes{node=\"" + victim_id + "\"}"));
  const double sockets = first_value(prometheus_query(port, "troupe_node_process_sockets{node=\"" + victim_id + "\"}"));
  INFO("the node's resident memory " << rss << " bytes, its sockets " << sockets);
  CHECK(rss > 1 << 20);
  CHECK(sockets >= 2);  // to the head and to the GCS at least
  REQUIRE(::kill(victim, SIGKILL) == 0);
  CHECK(poll_until([&] {
    return first_value(prometheus_query(port, "troupe_node_up{node=\"" + victim_id + "\"}")) == 0;
  }, std::chrono::seconds(30)));
  CHECK(first_value(prometheus_query(port, "troupe_nodes{state=\"DEAD\"}")) == 1);
}

TEST_CASE("Prometheus scrapes a --tls cluster's /metrics over HTTPS with a member certificate, and nothing without one",
          "[cluster][prometheus][tls]") {
  if (!std::filesystem::exists("/usr/bin/prometheus")) {
    WARN("SKIPPED: /usr/bin/prometheus is not installed (Debian's `prometheus` package; scripts/install-deps.sh "
         "installs it)");
    return;
  }
  ClusterFixture c;
  auto up = c.up("--tls --nodes 1 --cpus 2");
  const DashboardUrl url = dashboard_url(up.out);
  REQUIRE(up.out.find("dashboard:  https://") != std::string::npos);
  const std::string certs = c.home() + "/prometheus-cert";
  auto issued = c.troupe("tls issue --host 127.0.0.1 --name prometheus --out " + certs, 30);
  INFO(issued.both());
  REQUIRE(issued.exit_code == 0);
  const std::string target = "    static_configs:\n      - targets: ['" + url.host + ":" + std::to_string(url.port) + "']\n";
  const std::string dir = c.home() + "/prometheus";
  const int port = start_prometheus(c, dir,
                                    "  - job_name: member\n    scheme: https\n    tls_config:\n      ca_file: " + certs +
                                        "/ca.pem\n      cert_file: " + certs + "/prometheus.pem\n      key_file: " + certs +
                                        "/prometheus.key\n" + target +
                                        "  - job_name: stranger\n    scheme: https\n    tls_config:\n      ca_file: " +
                                        certs + "/ca.pem\n" + target);
  INFO(prometheus_log(dir));
  REQUIRE(poll_until([&] { return first_value(prometheus_query(port, "up{job=\"member\"}")) == 1; },
                     std::chrono::seconds(60)));
  CHECK(first_value(prometheus_query(port, "troupe_nodes{job=\"member\",state=\"ALIVE\"}")) == 2);
  // Without a certificate of the cluster the scrape is refused at the TLS handshake.
  CHECK(poll_until([&] { return first_value(prometheus_query(port, "up{job=\"stranger\"}")) == 0; },
                   std::chrono::seconds(30)));
}
