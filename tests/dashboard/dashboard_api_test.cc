// The JSON API over HTTP against an InMemoryStore: every endpoint, its filters and bounds, and the
// 400 / 404 / 503 answers. The server runs on a free loopback port; cpp-httplib's client asks.
#include <catch2/catch.hpp>

#include <set>

#include "dashboard/api.h"
#include "gcs/cluster_view.h"
#include "tests/dashboard/dashboard_fixture.h"

using namespace troupe;
using namespace troupe::testing;

namespace {

std::set<std::string> ids_of(const Json& list) {
  std::set<std::string> out;
  for (const Json& x : list) out.insert(x.at("id").get<std::string>());
  return out;
}

// id -> state of every entry of a list.
std::map<std::string, std::string> states_of(const Json& list) {
  std::map<std::string, std::string> out;
  for (const Json& x : list) out[x.at("id")] = x.at("state");
  return out;
}

}  // namespace

TEST_CASE("/api/cluster is gcs::cluster_view's document", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start();
  Json api = f.ok("/api/cluster");
  auto view = gcs::cluster_view(f.store());
  REQUIRE(view.ok());
  for (const char* section : {"nodes", "actors", "jobs"}) {
    INFO(section);
    CHECK(states_of(api.at(section)) == states_of(view->at(section)));
  }
  // The same document up to the clock: drop what depends on when it was read.
  auto timeless = [](Json v) {
    v["summary"].erase("now_ms");
    for (Json& n : v["nodes"]) n.erase("heartbeat_age_ms");
    return v;
  };
  CHECK(timeless(api) == timeless(*view));
  CHECK(api.at("nodes").at(0).at("id") == c.head.id.hex());  // heads first
  CHECK(api.at("events").size() == 6);
  CHECK(f.ok("/api/cluster?events=2").at("events").size() == 2);
  CHECK(f.ok("/api/cluster?events=0").at("events").empty());
  f.fails("/api/cluster?events=1001", 400);
  // actors=N: the first N actor entries in id order (the page asks for none); the summary counts all.
  Json two = f.ok("/api/cluster?actors=2");
  REQUIRE(two.at("actors").size() == 2);
  CHECK(two.at("actors").at(0) == api.at("actors").at(0));
  CHECK(two.at("summary").at("actors") == 7);
  CHECK(f.ok("/api/cluster?actors=0").at("actors").empty());
  CHECK(f.ok("/api/cluster?actors=1000000000").at("actors").size() == 7);
  CHECK(f.fails("/api/cluster?actors=-1", 400).at("parameter") == "actors");
  CHECK(f.fails("/api/cluster?actors=1000000001", 400).at("parameter") == "actors");
  f.fails("/api/cluster?verbose=1", 400);
}

TEST_CASE("/api/nodes lists nodes heads first and filters by state, /api/nodes/<id> adds its actors", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start();
  Json all = f.ok("/api/nodes");
  REQUIRE(all.at("nodes").size() == 3);
  CHECK(all.at("total") == 3);
  CHECK(all.at("nodes").at(0).at("is_head") == true);
  Json dead = f.ok("/api/nodes?state=dead");  // case does not matter
  REQUIRE(dead.at("nodes").size() == 1);
  CHECK(dead.at("nodes").at(0).at("id") == c.dead.id.hex());
  CHECK(dead.at("nodes").at(0).at("death_reason") == "connection lost");
  CHECK(f.fails("/api/nodes?state=ZOMBIE", 400).at("parameter") == "state");

  Json one = f.ok("/api/nodes/" + c.worker.id.hex());
  CHECK(one.at("node").at("id") == c.worker.id.hex());
  CHECK(one.at("total") == 4);  // 3 echo + 1 worker of the job
  for (const Json& a : one.at("actors")) CHECK(a.at("node") == c.worker.id.hex());
  CHECK(f.ok("/api/nodes/" + c.worker.id.hex() + "?limit=1").at("actors").size() == 1);
  f.fails("/api/nodes/" + NodeId::random().hex(), 404);
  CHECK(f.fails("/api/nodes/not-an-id", 400).at("parameter") == "id");
  CHECK(f.fails("/api/nodes/" + c.worker.id.hex().substr(0, 31) + "g", 400).at("parameter") == "id");
  f.fails("/api/nodes/" + c.worker.id.hex() + "/extra", 400);
}

TEST_CASE("/api/actors filters by state, node, job, type and text, bounded by limit", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start();
  Json all = f.ok("/api/actors");
  CHECK(all.at("total") == 7);
  CHECK(all.at("returned") == 7);
  CHECK(all.at("truncated") == false);
  CHECK(all.at("limit") == dashboard::kDefaultLimit);
  CHECK(ids_of(all.at("actors")).size() == 7);

  CHECK(f.ok("/api/actors?state=PENDING").at("actors").at(0).at("pending_reason") == "no node has 64 cpus free");
  CHECK(f.ok("/api/actors?state=alive").at("total") == 5);
  CHECK(f.ok("/api/actors?node=" + c.worker.id.hex().substr(0, 6)).at("total") == 4);
  CHECK(f.ok("/api/actors?job=" + c.running.id.hex()).at("total") == 2);
  CHECK(f.ok("/api/actors?type=echo").at("total") == 4);
  CHECK(f.ok("/api/actors?type=echo&state=ALIVE&node=" + c.worker.id.hex()).at("total") == 3);
  // Search: case-insensitive over type, name, reasons and ids.
  CHECK(f.ok("/api/actors?q=boom").at("total") == 1);
  CHECK(f.ok("/api/actors?q=TROUPE.W").at("total") == 2);
  CHECK(f.ok("/api/actors?q=" + c.actors[0].id.hex().substr(0, 10)).at("total") == 1);
  CHECK(f.ok("/api/actors?q=nothing-matches").at("total") == 0);

  Json two = f.ok("/api/actors?limit=2");
  CHECK(two.at("actors").size() == 2);
  CHECK(two.at("total") == 7);
  CHECK(two.at("truncated") == true);

  CHECK(f.fails("/api/actors?limit=abc", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/actors?limit=0", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/actors?limit=10001", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/actors?limit=-5", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/actors?limit=1e3", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/actors?limit=99999999999999999999999", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/actors?limit=5&limit=6", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/actors?node=xyz", 400).at("parameter") == "node");
  CHECK(f.fails("/api/actors?job=" + std::string(33, 'a'), 400).at("parameter") == "job");
  CHECK(f.fails("/api/actors?state=SLEEPING", 400).at("parameter") == "state");
  CHECK(f.fails("/api/actors?q=" + std::string(300, 'x'), 400).at("parameter") == "q");
  CHECK(f.fails("/api/actors?stat=ALIVE", 400).at("parameter") == "stat");
  CHECK(f.ok("/api/actors?limit=10000").at("total") == 7);
}

TEST_CASE("/api/jobs lists jobs newest first, /api/jobs/<id> has its actors and metrics", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start();
  Json jobs = f.ok("/api/jobs");
  REQUIRE(jobs.at("jobs").size() == 2);
  CHECK(jobs.at("jobs").at(0).at("id") == c.running.id.hex());
  CHECK(jobs.at("jobs").at(0).at("progress") == 0.25);
  CHECK(f.ok("/api/jobs?state=SUCCEEDED").at("jobs").at(0).at("id") == c.done.id.hex());
  CHECK(f.ok("/api/jobs?limit=1").at("truncated") == true);
  CHECK(f.fails("/api/jobs?state=LOST", 400).at("parameter") == "state");

  Json job = f.ok("/api/jobs/" + c.running.id.hex());
  CHECK(job.at("job").at("name") == "new");
  CHECK(job.at("actors").size() == 2);
  const Json& metrics = job.at("metrics");
  REQUIRE(metrics.size() == 40);  // 20 steps x (loss, samples/s); none of the other job's
  for (const Json& m : metrics) CHECK(m.at("name").get<std::string>().rfind("job/" + c.running.id.hex() + "/", 0) == 0);
  CHECK(metrics.back().at("time_ms") >= metrics.front().at("time_ms"));  // oldest first
  Json few = f.ok("/api/jobs/" + c.running.id.hex() + "?metrics=3");
  REQUIRE(few.at("metrics").size() == 3);
  CHECK(few.at("metrics").back() == metrics.back());  // the newest ones
  CHECK(f.ok("/api/jobs/" + c.running.id.hex() + "?metrics=0").at("metrics").empty());

  Json missing = f.fails("/api/jobs/" + JobId::random().hex(), 404);
  CHECK(missing.at("error").get<std::string>().find("no job") != std::string::npos);
  CHECK(f.fails("/api/jobs/12345", 400).at("parameter") == "id");
  CHECK(f.fails("/api/jobs/" + c.running.id.hex() + "?metrics=x", 400).at("parameter") == "metrics");
  // An upper-case id is refused rather than guessed at (ids are printed lower case everywhere).
  std::string upper = c.running.id.hex();
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (upper != c.running.id.hex()) f.fails("/api/jobs/" + upper, 400);
}

TEST_CASE("/api/events and /api/metrics return the newest entries, filtered and bounded", "[dashboard]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start();
  Json events = f.ok("/api/events");
  REQUIRE(events.at("events").size() == 6);
  CHECK(events.at("events").back().at("kind") == "node_died");  // oldest first, newest last
  Json last2 = f.ok("/api/events?limit=2");
  REQUIRE(last2.at("events").size() == 2);
  CHECK(last2.at("events").at(1) == events.at("events").back());
  CHECK(f.ok("/api/events?kind=node_died").at("events").size() == 1);
  CHECK(f.ok("/api/events?subject=" + c.actors[1].id.hex()).at("events").size() == 1);
  CHECK(f.ok("/api/events?kind=actor_started&limit=3").at("events").size() == 3);
  CHECK(f.fails("/api/events?limit=20000", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/events?subject=zz", 400).at("parameter") == "subject");

  CHECK(f.ok("/api/metrics").at("metrics").size() == 61);
  CHECK(f.ok("/api/metrics?prefix=node/").at("metrics").size() == 1);
  Json loss = f.ok("/api/metrics?prefix=job/" + c.running.id.hex() + "/loss&limit=5");
  REQUIRE(loss.at("metrics").size() == 5);
  CHECK(loss.at("metrics").back().at("value") == Approx(1.0 / 20));
  CHECK(f.fails("/api/metrics?limit=", 400).at("parameter") == "limit");
  CHECK(f.fails("/api/metrics?prefix=" + std::string(257, 'p'), 400).at("parameter") == "prefix");
}

TEST_CASE("unknown paths are 404 JSON, a GCS that is down is 503 naming it, huge requests are refused", "[dashboard]") {
  DashboardFixture f;
  seed_cluster(f.store());
  f.start();
  f.fails("/api/nothing", 404);
  f.fails("/api", 404);
  f.fails("/favicon.ico", 404);

  f.store().set_down(true);
  for (const char* path : {"/api/cluster", "/api/nodes", "/api/actors", "/api/jobs", "/api/events", "/api/metrics"}) {
    Json j = f.fails(path, 503);
    CHECK(j.at("error").get<std::string>().find("GCS") != std::string::npos);
  }
  // Parameters are checked before the GCS is read.
  f.fails("/api/actors?limit=x", 400);
  f.store().set_down(false);
  f.ok("/api/cluster");

  // A request line beyond cpp-httplib's 8 KiB limit: refused, the server lives on.
  auto res = f.client()->Get(("/api/actors?q=" + std::string(20000, 'a')).c_str());
  REQUIRE(res);
  CHECK(res->status >= 400);
  CHECK(res->status < 500);
  f.ok("/api/nodes");
  // Not GET: refused.
  auto post = f.client()->Post("/api/cluster", "{}", "application/json");
  REQUIRE(post);
  CHECK(post->status >= 400);
  CHECK(post->status < 500);
}

TEST_CASE("handle_api answers without HTTP as well", "[dashboard]") {
  gcs::InMemoryStore store;
  seed_cluster(store);
  dashboard::ApiResponse r = dashboard::handle_api(store, {"/api/nodes", {{"state", "ALIVE"}}});
  CHECK(r.status == 200);
  CHECK(r.body.at("nodes").size() == 2);
  r = dashboard::handle_api(store, {"/api/actors", {{"limit", "abc"}}});
  CHECK(r.status == 400);
  CHECK(r.body.at("parameter") == "limit");
  CHECK(r.body.at("error").get<std::string>().find("'abc'") != std::string::npos);
  CHECK(dashboard::handle_api(store, {"/api/jobs/", {}}).status == 404);
}
