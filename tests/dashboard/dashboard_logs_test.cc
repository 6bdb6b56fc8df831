// /api/logs against an InMemoryStore and log files in a temporary directory: which nodes are
// readable (this host's, with a log file), the node/actor/job filters, the bounds on lines and
// bytes, and the 400/404 answers.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/dashboard/dashboard_fixture.h"

using namespace troupe;
using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

struct LogDir {
  fs::path path;
  LogDir() {
    char tmpl[] = "/tmp/troupe-logs-test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~LogDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(path / name) << text; }
};

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

TEST_CASE("/api/logs serves bounded tails of this host's nodes and says why others are missing", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  // The head and the worker node run here; the dead node on another host.
  for (gcs::NodeRecord* n : {&c.head, &c.worker}) {
    n->hostname = hostname();
    REQUIRE(gcs::Table<gcs::NodeRecord>(f.store()).put(*n).ok());
  }
  c.running.actors = {c.actors[5].id.hex(), c.actors[6].id.hex()};
  REQUIRE(gcs::Table<gcs::JobRecord>(f.store()).put(c.running).ok());
  LogDir dir;
  const std::string job_short = c.running.id.short_hex();
  std::string worker_log;
  for (int i = 0; i < 1000; ++i) worker_log += "[info] line " + std::to_string(i) + "\n";
  worker_log += "[info] job " + job_short + " worker 0: sync training mlp\n";
  worker_log += "[error] actor " + c.actors[0].id.short_hex() + " crashed\n";
  dir.write("troupe-node-" + std::to_string(c.worker.pid) + ".log", worker_log);
  dir.write("troupe-head-" + std::to_string(c.head.pid) + ".log",
            "[info] head up\n[info] job " + job_short + " worker 1: sync training mlp\n");
  f.start([&](dashboard::DashboardOptions& o) { o.log_dir = dir.path.string(); });

  Json all = f.ok("/api/logs?lines=5");
  REQUIRE(all.at("logs").size() == 2);
  CHECK(all.at("logs")[0].at("is_head") == true);  // heads first
  const Json& worker = all.at("logs")[1];
  CHECK(worker.at("node") == c.worker.id.hex());
  REQUIRE(worker.at("lines").size() == 5);
  CHECK(worker.at("lines").back().get<std::string>().find("crashed") != std::string::npos);
  REQUIRE(all.at("unavailable").size() == 1);
  CHECK(all.at("unavailable")[0].at("node") == c.dead.id.hex());
  CHECK(all.at("unavailable")[0].at("reason").get<std::string>().find("troupe logs") != std::string::npos);

  // node=: one node.
  Json one = f.ok("/api/logs?node=" + c.worker.id.hex().substr(0, 6));
  REQUIRE(one.at("logs").size() == 1);
  CHECK(one.at("logs")[0].at("lines").size() == 200);  // the default
  // job=: the job's lines from every node.
  Json job = f.ok("/api/logs?job=" + c.running.id.hex());
  REQUIRE(job.at("logs").size() == 2);
  CHECK(job.at("logs")[0].at("lines").size() == 1);
  CHECK(job.at("logs")[1].at("lines")[0].get<std::string>().find("worker 0") != std::string::npos);
  // actor=: its node's lines naming it (a job's worker: "job <j> worker <i>").
  Json actor = f.ok("/api/logs?actor=" + c.actors[6].id.hex());
  REQUIRE(actor.at("logs").size() == 1);
  CHECK(actor.at("logs")[0].at("node") == c.head.id.hex());
  REQUIRE(actor.at("logs")[0].at("lines").size() == 1);
  CHECK(actor.at("logs")[0].at("lines")[0].get<std::string>().find("worker 1") != std::string::npos);
  Json plain = f.ok("/api/logs?actor=" + c.actors[0].id.hex());
  CHECK(plain.at("logs")[0].at("lines").size() == 1);

  // Bad input: 400 naming the parameter, 404 for unknown ids.
  CHECK(f.fails("/api/logs?lines=0", 400).at("parameter") == "lines");
  CHECK(f.fails("/api/logs?lines=5001", 400).at("parameter") == "lines");
  CHECK(f.fails("/api/logs?lines=ten", 400).at("parameter") == "lines");
  CHECK(f.fails("/api/logs?node=xyz", 400).at("parameter") == "node");
  CHECK(f.fails("/api/logs?level=info", 400).at("parameter") == "level");
  f.fails("/api/logs?node=" + std::string(32, '0'), 404);
  f.fails("/api/logs?actor=" + std::string(32, '0'), 404);
  f.fails("/api/logs?job=" + std::string(32, '0'), 404);
}

TEST_CASE("/api/logs stays bounded on huge logs and odd bytes", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  c.worker.hostname = hostname();
  REQUIRE(gcs::Table<gcs::NodeRecord>(f.store()).put(c.worker).ok());
  LogDir dir;
  // 12 MiB of 3 KiB lines with invalid UTF-8: only the file's end is read, lines are cut, the
  // answer stays under its byte bound and is valid JSON.
  const std::string line = std::string(3000, 'x') + "\xff\xfe\n";
  {
    std::ofstream out(dir.path / ("troupe-node-" + std::to_string(c.worker.pid) + ".log"));
    for (int i = 0; i < 4200; ++i) out << line;
  }
  f.start([&](dashboard::DashboardOptions& o) { o.log_dir = dir.path.string(); });
  auto res = f.client()->Get(("/api/logs?lines=5000&node=" + c.worker.id.hex()).c_str());
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->body.size() < (2u << 20));
  Json j = Json::parse(res->body);
  const Json& log = j.at("logs").at(0);
  CHECK(log.at("scanned_all") == false);
  CHECK(log.at("lines").size() < 1400);
  CHECK(log.at("lines")[0].get<std::string>().size() <= 2003);
}
