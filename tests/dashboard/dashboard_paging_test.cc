// Paging of the API's long lists over HTTP against an InMemoryStore: 10,000 actors paged by cursor
// and by offset (each exactly once, in order, no cursor after the last page), a table that changes
// between pages, nodes and jobs pages in their own orders, and 400s naming the bad parameter.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "tests/dashboard/dashboard_fixture.h"

using namespace troupe;
using namespace troupe::testing;

namespace {

// `n` actors on `node`, every third DEAD, the rest ALIVE; written in one call.
std::vector<gcs::ActorRecord> add_actors(gcs::Store& store, int n, const NodeId& node) {
  std::vector<gcs::ActorRecord> actors;
  for (int i = 0; i < n; ++i) {
    actors.push_back(make_actor("echo", node, i % 3 == 0 ? gcs::ActorState::dead : gcs::ActorState::alive));
  }
  REQUIRE(gcs::Table<gcs::ActorRecord>(store).put_many(actors).ok());
  return actors;
}

std::vector<std::string> sorted_ids(const std::vector<gcs::ActorRecord>& actors) {
  std::vector<std::string> ids;
  for (const auto& a : actors) ids.push_back(a.id.hex());
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Follows `next` from `path` (which has a '?') to the end; the ids of every page's `list`, in the
// order served. Fails when a page's start, returned or total disagree with what came before.
std::vector<std::string> follow(DashboardFixture& f, const std::string& path, const char* list, size_t max_pages) {
  std::vector<std::string> ids;
  std::string after;
  for (size_t page = 0;; ++page) {
    REQUIRE(page < max_pages);  // a cursor that does not move would loop forever
    Json j = f.ok(path + (after.empty() ? "" : "&after=" + after));
    CHECK(j.at("start") == ids.size());
    CHECK(j.at("returned") == j.at(list).size());
    for (const Json& x : j.at(list)) ids.push_back(x.at("id"));
    CHECK(j.at("truncated") == j.contains("next"));
    if (!j.contains("next")) {
      CHECK(j.at("total") == ids.size());
      return ids;
    }
    after = j.at("next").get<std::string>();
  }
}

}  // namespace

TEST_CASE("10000 actors paged by cursor and by offset come each once, in id order, with no next at the end",
          "[dashboard][paging]") {
  DashboardFixture f;
  gcs::NodeRecord node_record;
  node_record.id = NodeId::random();
  REQUIRE(gcs::Table<gcs::NodeRecord>(f.store()).put(node_record).ok());
  const NodeId node = node_record.id;
  const auto actors = add_actors(f.store(), 10000, node);
  f.start();
  const std::vector<std::string> all = sorted_ids(actors);

  CHECK(follow(f, "/api/actors?limit=100", "actors", 101) == all);

  // By offset: the same pages, each saying where it starts.
  std::vector<std::string> by_offset;
  for (int offset = 0; offset < 10000; offset += 100) {
    Json j = f.ok("/api/actors?limit=100&offset=" + std::to_string(offset));
    REQUIRE(j.at("actors").size() == 100);
    CHECK(j.at("start") == offset);
    CHECK(j.at("total") == 10000);
    CHECK(j.contains("next") == (offset + 100 < 10000));
    for (const Json& a : j.at("actors")) by_offset.push_back(a.at("id"));
  }
  CHECK(by_offset == all);
  Json past = f.ok("/api/actors?limit=100&offset=20000");
  CHECK(past.at("actors").empty());
  CHECK(past.at("start") == 10000);
  CHECK_FALSE(past.contains("next"));

  // A cursor and an offset together: skip 50 past the cursor.
  Json j = f.ok("/api/actors?limit=10&offset=50&after=" + all[99]);
  CHECK(j.at("start") == 150);
  CHECK(j.at("actors").at(0).at("id") == all[150]);
  CHECK(j.at("next") == all[159]);

  // Filtered (every record read and matched): the ALIVE ones, each once, in order; and the node's.
  std::vector<std::string> alive;
  for (const auto& a : actors) {
    if (a.state == gcs::ActorState::alive) alive.push_back(a.id.hex());
  }
  std::sort(alive.begin(), alive.end());
  CHECK(follow(f, "/api/actors?state=ALIVE&limit=1000", "actors", 8) == alive);
  CHECK(follow(f, "/api/nodes/" + node.hex() + "?limit=2500", "actors", 5) == all);
}

TEST_CASE("actors added and removed between pages: the ones that stayed come once each, in order",
          "[dashboard][paging]") {
  DashboardFixture f;
  const NodeId node = NodeId::random();
  auto actors = add_actors(f.store(), 1000, node);
  f.start();
  gcs::Table<gcs::ActorRecord> table(f.store());
  const std::vector<std::string> before = sorted_ids(actors);
  const bool filtered = GENERATE(false, true);  // keys and the page's rows; or every record matched
  const std::string filter = filtered ? "&node=" + node.hex() : "";
  INFO("filter " << filter);

  std::vector<std::string> served;
  std::set<std::string> removed;
  std::string after;
  for (int page = 0;; ++page) {
    REQUIRE(page < 40);
    Json j = f.ok("/api/actors?limit=100" + filter + (after.empty() ? "" : "&after=" + after));
    for (const Json& a : j.at("actors")) served.push_back(a.at("id"));
    if (!j.contains("next")) break;
    after = j.at("next").get<std::string>();
    // Between pages: remove the page's last actor (the cursor's own), one already served and one
    // not served yet, and add 20 new ones (random ids: before and after the cursor).
    REQUIRE(table.remove(after).ok());
    removed.insert(after);
    const size_t at = std::lower_bound(before.begin(), before.end(), after) - before.begin();
    for (size_t victim : {at / 2, at + 37}) {
      if (victim >= before.size()) continue;
      REQUIRE(table.remove(before[victim]).ok());
      removed.insert(before[victim]);
    }
    auto added = add_actors(f.store(), 20, node);
    actors.insert(actors.end(), added.begin(), added.end());
  }
  CHECK(std::is_sorted(served.begin(), served.end()));
  CHECK(std::adjacent_find(served.begin(), served.end()) == served.end());  // none twice
  const std::set<std::string> got(served.begin(), served.end());
  for (const std::string& id : before) {
    if (!removed.count(id)) CHECK(got.count(id) == 1);  // stayed throughout: served
  }
}

TEST_CASE("nodes and jobs page in their own orders, the pages together the whole list", "[dashboard][paging]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start();
  std::vector<std::string> nodes, jobs;
  const Json all_nodes = f.ok("/api/nodes"), all_jobs = f.ok("/api/jobs");
  for (const Json& n : all_nodes.at("nodes")) nodes.push_back(n.at("id"));
  for (const Json& j : all_jobs.at("jobs")) jobs.push_back(j.at("id"));
  REQUIRE(nodes.size() == 3);
  CHECK(nodes.front() == c.head.id.hex());  // heads first
  REQUIRE(jobs == std::vector<std::string>{c.running.id.hex(), c.done.id.hex()});  // newest first
  CHECK(follow(f, "/api/nodes?limit=1", "nodes", 4) == nodes);
  CHECK(follow(f, "/api/jobs?limit=1", "jobs", 3) == jobs);
  Json first = f.ok("/api/jobs?limit=1");
  CHECK(first.at("next") == "-" + std::to_string(c.running.submitted_ms) + "." + c.running.id.hex());
  CHECK(f.ok("/api/nodes?limit=2&offset=1").at("nodes").at(0).at("id") == nodes[1]);
  CHECK(f.ok("/api/nodes?state=ALIVE&limit=1&offset=1").at("nodes").at(0).at("id") == c.worker.id.hex());
}

TEST_CASE("bad after, offset and limit are 400 naming the parameter", "[dashboard][paging]") {
  DashboardFixture f;
  SeededCluster c = seed_cluster(f.store());
  f.start();
  const std::string id = c.actors[0].id.hex();
  for (const std::string& path : {std::string("/api/actors"), std::string("/api/nodes"), std::string("/api/jobs"),
                                 "/api/nodes/" + c.worker.id.hex()}) {
    INFO(path);
    for (const char* bad : {"-1", "abc", "1e3", "", "1000000001", "5&offset=6"}) {
      INFO(bad);
      CHECK(f.fails(path + "?offset=" + bad, 400).at("parameter") == "offset");
    }
    for (const char* bad : {"0", "10001", "x"}) CHECK(f.fails(path + "?limit=" + bad, 400).at("parameter") == "limit");
    for (const std::string& bad : {std::string("xyz"), std::string(), id.substr(0, 31), id + "0", std::string(32, 'g'),
                                   "." + id, "1.2.3." + id, "1.x." + id}) {
      INFO(bad);
      Json e = f.fails(path + "?after=" + bad, 400);
      CHECK(e.at("parameter") == "after");
      CHECK(e.at("error").get<std::string>().find("the 'next' of the page before") != std::string::npos);
    }
    CHECK(f.fails(path + "?after=" + std::string(200, '1'), 400).at("parameter") == "after");
    CHECK(f.fails(path + "?after=" + id + "&after=" + c.actors[1].id.hex(), 400).at("parameter") == "after");
  }
  // Each list's cursor has its own shape: an actor id is not a node's or a job's cursor.
  size_t rank = 0;
  for (const auto& a : c.actors) rank += a.id.hex() <= id ? 1 : 0;
  CHECK(f.ok("/api/actors?after=" + id).at("start") == rank);
  CHECK(f.fails("/api/nodes?after=" + id, 400).at("parameter") == "after");
  CHECK(f.fails("/api/nodes?after=1." + id, 400).at("parameter") == "after");
  CHECK(f.ok("/api/nodes?after=1.5." + id).at("nodes").size() == 2);  // non-heads started after 5 ms
  CHECK(f.fails("/api/jobs?after=" + id, 400).at("parameter") == "after");
  CHECK(f.ok("/api/jobs?after=-5." + id).at("jobs").empty());  // jobs submitted before 5 ms: none
  CHECK(f.ok("/api/actors?after=" + std::string(32, 'F')).at("actors").empty());  // any case
}
