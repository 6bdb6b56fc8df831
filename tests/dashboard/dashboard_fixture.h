// A dashboard server on a free loopback port over an InMemoryStore seeded with a small cluster
// (three nodes, actors in every state, two jobs with metrics, events), and cpp-httplib's client to
// ask it. The server stops when the fixture goes.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "dashboard/dashboard_server.h"
#include "gcs/events.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"

namespace troupe::testing {

using Json = nlohmann::json;

// The seeded cluster's ids, for the assertions.
struct SeededCluster {
  gcs::NodeRecord head, worker, dead;
  gcs::JobRecord running, done;
  std::vector<gcs::ActorRecord> actors;  // in the order written
};

inline gcs::ActorRecord make_actor(const std::string& type, const NodeId& node, gcs::ActorState state,
                                   const JobId& job = JobId()) {
  gcs::ActorRecord a;
  a.id = ActorId::random();
  a.type_name = type;
  a.node = node;
  a.job = job;
  a.state = state;
  a.updated_ms = gcs::now_ms();
  return a;
}

inline SeededCluster seed_cluster(gcs::Store& store) {
  SeededCluster c;
  const int64_t now = gcs::now_ms();
  auto node = [&](gcs::NodeRecord& n, bool head, gcs::NodeState state, int64_t started) {
    n.id = NodeId::random();
    n.address = "127.0.0.1:" + std::to_string(5000 + started % 100);
    n.hostname = "host";
    n.pid = 100 + static_cast<int>(started % 100);
    n.is_head = head;
    n.version = "test";
    n.total = {4, 0, int64_t{8} << 30};
    n.used = {1, 0, 0};
    n.state = state;
    n.started_ms = now - 10000 + started;
    n.last_heartbeat_ms = now - 100;
    if (state == gcs::NodeState::dead) n.death_reason = "connection lost";
    REQUIRE(gcs::Table<gcs::NodeRecord>(store).put(n).ok());
  };
  node(c.head, true, gcs::NodeState::alive, 1);
  node(c.worker, false, gcs::NodeState::alive, 2);
  node(c.dead, false, gcs::NodeState::dead, 3);

  auto job = [&](gcs::JobRecord& j, const std::string& name, gcs::JobState state, int64_t submitted) {
    j.id = JobId::random();
    j.name = name;
    j.strategy = "sync";
    j.state = state;
    j.workers = 2;
    j.submitted_ms = submitted;
    j.progress = state == gcs::JobState::running ? 0.25 : 1.0;
    j.epoch = 1;
    j.epochs = 4;
    j.loss = 0.5;
    REQUIRE(gcs::Table<gcs::JobRecord>(store).put(j).ok());
  };
  job(c.done, "old", gcs::JobState::succeeded, now - 60000);
  job(c.running, "new", gcs::JobState::running, now - 1000);

  for (int i = 0; i < 3; ++i) c.actors.push_back(make_actor("echo", c.worker.id, gcs::ActorState::alive));
  c.actors.push_back(make_actor("counter", c.dead.id, gcs::ActorState::dead));
  c.actors.back().death_reason = "node died: Boom";
  c.actors.push_back(make_actor("echo", NodeId(), gcs::ActorState::pending));
  c.actors.back().pending_reason = "no node has 64 cpus free";
  for (int r = 0; r < 2; ++r) {
    c.actors.push_back(make_actor("troupe.worker", r ? c.head.id : c.worker.id, gcs::ActorState::alive, c.running.id));
  }
  REQUIRE(gcs::Table<gcs::ActorRecord>(store).put_many(c.actors).ok());

  for (int i = 0; i < 5; ++i) {
    REQUIRE(gcs::record_event(store, {now - 5000 + i, "actor_started", c.actors[i].id.hex(), "started " + std::to_string(i)}).ok());
  }
  REQUIRE(gcs::record_event(store, {now - 10, "node_died", c.dead.id.hex(), "node died: connection lost"}).ok());
  for (int step = 0; step < 20; ++step) {
    const std::string run = "job/" + c.running.id.hex() + "/";
    REQUIRE(gcs::record_metric(store, {now - 2000 + step, run + "loss", 1.0 / (step + 1)}).ok());
    REQUIRE(gcs::record_metric(store, {now - 2000 + step, run + "worker/0/samples_per_second", 1000.0 + step}).ok());
    REQUIRE(gcs::record_metric(store, {now - 2000 + step, "job/" + c.done.id.hex() + "/loss", 2.0}).ok());
  }
  REQUIRE(gcs::record_metric(store, {now, "node/" + c.head.id.hex() + "/cpu_used", 1.0}).ok());
  return c;
}

class DashboardFixture {
 public:
  DashboardFixture() : store_(std::make_shared<gcs::InMemoryStore>()) {}

  gcs::InMemoryStore& store() { return *store_; }

  // Starts the server on 127.0.0.1, a free port; `adjust` may change the options first.
  template <class F>
  void start(F adjust) {
    dashboard::DashboardOptions o;
    o.bind = "127.0.0.1";
    o.port = 0;
    o.token = "secret-token";
    o.store = store_;
    adjust(o);
    auto s = dashboard::DashboardServer::start(o);
    INFO(s.status().to_string());
    REQUIRE(s.ok());
    server_ = std::move(*s);
  }
  void start() {
    start([](dashboard::DashboardOptions&) {});
  }

  dashboard::DashboardServer& server() { return *server_; }

  std::unique_ptr<httplib::Client> client() {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    c->set_read_timeout(10, 0);
    return c;
  }

  // GET `path`; the status into *status, the body parsed (REQUIREd to be JSON).
  Json get(const std::string& path, int* status, const httplib::Headers& headers = {}) {
    auto res = client()->Get(path.c_str(), headers);
    INFO("GET " << path);
    REQUIRE(res);
    *status = res->status;
    INFO(res->body);
    REQUIRE(res->get_header_value("Content-Type") == "application/json");
    return Json::parse(res->body);
  }
  // GET `path`, REQUIREd to answer 200.
  Json ok(const std::string& path) {
    int status = 0;
    Json j = get(path, &status);
    INFO("GET " << path << ": " << j.dump());
    REQUIRE(status == 200);
    return j;
  }
  // GET `path`, REQUIREd to answer `want` with an error message; returns the body.
  Json fails(const std::string& path, int want) {
    int status = 0;
    Json j = get(path, &status);
    INFO("GET " << path << ": " << j.dump());
    REQUIRE(status == want);
    REQUIRE(j.contains("error"));
    REQUIRE(!j.at("error").get<std::string>().empty());
    return j;
  }

 private:
  std::shared_ptr<gcs::InMemoryStore> store_;
  std::unique_ptr<dashboard::DashboardServer> server_;
};

}  // namespace troupe::testing
