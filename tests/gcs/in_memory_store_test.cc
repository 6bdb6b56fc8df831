// InMemoryStore (the fake behind the Store seam), typed tables over it and the events/metrics
// streams: the semantics the layers above rely on, checked without a server.
#include "gcs/in_memory_store.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

#include "gcs/events.h"
#include "gcs/tables.h"
#include "tests/gcs/compare_and_set_race.h"

namespace troupe::gcs {

using namespace std::chrono_literals;

TEST_CASE("memory store: put, get, remove, get_all, keys and get_many", "[gcs][memory]") {
  InMemoryStore s;
  REQUIRE(s.put("t", "a", "1").ok());
  REQUIRE(s.put("t", "b", std::string("\0\xff", 2)).ok());
  REQUIRE(s.put("other", "a", "x").ok());
  REQUIRE(s.put("t", "a", "2").ok());  // overwrite

  auto a = s.get("t", "a");
  REQUIRE(a.ok());
  REQUIRE(a->has_value());
  CHECK(**a == "2");
  CHECK(**s.get("t", "b") == std::string("\0\xff", 2));
  CHECK_FALSE(s.get("t", "zz")->has_value());
  CHECK_FALSE(s.get("no-table", "a")->has_value());

  auto all = s.get_all("t");
  REQUIRE(all.ok());
  CHECK(all->size() == 2);
  auto keys = s.keys("t");
  REQUIRE(keys.ok());
  std::sort(keys->begin(), keys->end());
  CHECK(*keys == std::vector<std::string>{"a", "b"});
  CHECK(s.keys("none")->empty());
  auto some = s.get_many("t", {"b", "zz", "a"});
  REQUIRE(some.ok());
  REQUIRE(some->size() == 3);
  CHECK((*some)[0] == std::optional<std::string>(std::string("\0\xff", 2)));
  CHECK_FALSE((*some)[1].has_value());
  CHECK((*some)[2] == std::optional<std::string>("2"));

  REQUIRE(s.remove("t", "a").ok());
  REQUIRE(s.remove("t", "a").ok());  // absent: not an error
  CHECK_FALSE(s.get("t", "a")->has_value());
  CHECK(s.get_all("t")->size() == 1);
  CHECK(s.get_all("none")->empty());
}

TEST_CASE("memory store: put_if_absent stores only the first value", "[gcs][memory]") {
  InMemoryStore s;
  CHECK(*s.put_if_absent("t", "k", "first"));
  CHECK_FALSE(*s.put_if_absent("t", "k", "second"));
  CHECK(**s.get("t", "k") == "first");
}

TEST_CASE("memory store: compare_and_set replaces only the expected value", "[gcs][memory]") {
  InMemoryStore s;
  CHECK_FALSE(*s.compare_and_set("t", "k", "", "x"));  // absent key: never replaced
  CHECK_FALSE(s.get("t", "k")->has_value());
  REQUIRE(s.put("t", "k", std::string("a\0b", 3)).ok());
  CHECK_FALSE(*s.compare_and_set("t", "k", "a", "x"));  // a prefix is not equal
  CHECK(*s.compare_and_set("t", "k", std::string("a\0b", 3), "x"));
  CHECK(**s.get("t", "k") == "x");
  s.set_down(true);
  CHECK(s.compare_and_set("t", "k", "x", "y").status().code() == Code::unavailable);
}

TEST_CASE("memory store: racing compare_and_set loops lose no update", "[gcs][memory]") {
  InMemoryStore s;
  testing::race_compare_and_set([&](int) -> Store& { return s; }, 4, 500);
}

TEST_CASE("memory store: streams keep the newest max_len entries in order", "[gcs][memory]") {
  InMemoryStore s;
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(*s.append("log", "v" + std::to_string(i), 4));
  auto recent = s.read_recent("log", 100);
  REQUIRE(recent.ok());
  REQUIRE(recent->size() == 4);
  CHECK(recent->front().value == "v6");
  CHECK(recent->back().value == "v9");
  CHECK(recent->back().id == ids.back());

  auto two = s.read_recent("log", 2);
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].value == "v8");

  auto after = s.read_after("log", ids[7], 10);
  REQUIRE(after->size() == 2);
  CHECK((*after)[0].value == "v8");
  CHECK(s.read_after("log", "", 3)->front().value == "v6");
  CHECK(s.read_after("log", "0", 2)->size() == 2);
  CHECK(s.read_after("log", ids.back(), 10)->empty());
  CHECK(s.read_recent("empty", 5)->empty());
}

TEST_CASE("memory store: subscribers get what is published after they subscribed", "[gcs][memory]") {
  InMemoryStore s;
  REQUIRE(s.publish("nodes", "before").ok());
  auto sub = s.subscribe({"nodes", "jobs"});
  REQUIRE(sub.ok());
  auto none = (*sub)->next(10ms);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  REQUIRE(s.publish("actors", "ignored").ok());
  REQUIRE(s.publish("jobs", "j1").ok());
  std::thread later([&] {
    std::this_thread::sleep_for(20ms);
    (void)s.publish("nodes", "n1");
  });
  auto n = (*sub)->next(5s);
  REQUIRE(n.ok());
  REQUIRE(n->has_value());
  CHECK((*n)->channel == "jobs");
  CHECK((*n)->message == "j1");
  n = (*sub)->next(5s);
  later.join();
  REQUIRE(n->has_value());
  CHECK((*n)->channel == "nodes");
  CHECK((*n)->message == "n1");
}

TEST_CASE("memory store: set_down makes every call unavailable until it is up again", "[gcs][memory]") {
  InMemoryStore s;
  REQUIRE(s.put("t", "k", "v").ok());
  s.set_down(true);
  CHECK(s.put("t", "k", "w").code() == Code::unavailable);
  CHECK(s.get("t", "k").status().code() == Code::unavailable);
  CHECK(s.append("s", "v", 1).status().code() == Code::unavailable);
  CHECK(s.publish("c", "m").code() == Code::unavailable);
  s.set_down(false);
  CHECK(**s.get("t", "k") == "v");
}

TEST_CASE("table: put, get, list and remove typed records, notifying watchers", "[gcs][table]") {
  InMemoryStore s;
  Table<JobRecord> jobs(s);
  auto sub = s.subscribe({"jobs"});
  REQUIRE(sub.ok());

  JobRecord j;
  j.id = JobId::random();
  j.name = "mnist";
  j.state = JobState::running;
  REQUIRE(jobs.put(j).ok());
  auto n = (*sub)->next(1s);
  REQUIRE(n->has_value());
  CHECK((*n)->message == j.id.hex());

  auto got = jobs.get(j.id.hex());
  REQUIRE(got.ok());
  CHECK(got->name == "mnist");
  CHECK(got->state == JobState::running);

  JobRecord k;
  k.id = JobId::random();
  REQUIRE(jobs.put(k).ok());
  CHECK(jobs.list()->size() == 2);

  REQUIRE(jobs.remove(j.id.hex()).ok());
  Status missing = jobs.get(j.id.hex()).status();
  CHECK(missing.code() == Code::not_found);
  CHECK_THAT(missing.message(), Catch::Contains(j.id.hex()));
  CHECK(jobs.list()->size() == 1);
}

TEST_CASE("table: a malformed record fails get and list naming its key", "[gcs][table]") {
  InMemoryStore s;
  Table<NodeRecord> nodes(s);
  NodeRecord good;
  good.id = NodeId::random();
  REQUIRE(nodes.put(good).ok());
  REQUIRE(s.put("nodes", "bad-key", "not msgpack at all").ok());

  Status st = nodes.get("bad-key").status();
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("nodes/bad-key"));
  st = nodes.list().status();
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("nodes/bad-key"));
  CHECK(nodes.get(good.id.hex()).ok());
}

TEST_CASE("table: errors of the store reach the caller", "[gcs][table]") {
  InMemoryStore s;
  Table<ActorRecord> actors(s);
  s.set_down(true);
  CHECK(actors.put(ActorRecord{}).code() == Code::unavailable);
  CHECK(actors.list().status().code() == Code::unavailable);
}

TEST_CASE("events: recorded events come back newest last, with their time filled in", "[gcs][events]") {
  InMemoryStore s;
  auto sub = s.subscribe({kEventStream});
  REQUIRE(sub.ok());
  const int64_t t0 = now_ms();
  REQUIRE(record_event(s, {0, "node_joined", "abc", "node abc joined"}).ok());
  REQUIRE(record_event(s, {5, "node_died", "abc", "heartbeat lost"}).ok());
  auto ev = recent_events(s, 10);
  REQUIRE(ev.ok());
  REQUIRE(ev->size() == 2);
  CHECK((*ev)[0].kind == "node_joined");
  CHECK((*ev)[0].time_ms >= t0);
  CHECK((*ev)[1].time_ms == 5);
  CHECK((*ev)[1].message == "heartbeat lost");

  auto n = (*sub)->next(1s);
  REQUIRE(n->has_value());
  Event published;
  REQUIRE(decode_event((*n)->message, &published).ok());
  CHECK(published.subject == "abc");
}

TEST_CASE("events: metrics round trip and a bad stream entry fails naming it", "[gcs][events]") {
  InMemoryStore s;
  REQUIRE(record_metric(s, {0, "job/1/loss", 0.125}).ok());
  auto m = recent_metrics(s, 1);
  REQUIRE(m.ok());
  REQUIRE(m->size() == 1);
  CHECK((*m)[0].name == "job/1/loss");
  CHECK((*m)[0].value == 0.125);

  auto id = s.append(kEventStream, "garbage", kEventStreamLength);
  REQUIRE(id.ok());
  Status st = recent_events(s, 5).status();
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains(*id));

  Metric out;
  CHECK(decode_metric(encode_event(Event{}), &out).code() == Code::corrupt_data);
}

}  // namespace troupe::gcs
