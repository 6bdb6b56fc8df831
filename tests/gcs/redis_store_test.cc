// RedisStore against a real redis-server: tables, streams, pub/sub, pipelining, typed tables and
// events over it, and how bad data in Redis is reported.
#include "gcs/redis_store.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "gcs/events.h"
#include "gcs/tables.h"
#include "tests/gcs/compare_and_set_race.h"
#include "tests/gcs/redis_fixture.h"

namespace troupe::gcs {

using namespace std::chrono_literals;
using testing::connect_store;
using testing::shared_redis;

TEST_CASE("redis store: put, get, remove, get_all, keys and get_many", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-table");
  const std::string binary("\0\xff\r\n$3", 6);
  REQUIRE(s->put("t", "a", "1").ok());
  REQUIRE(s->put("t", "b", binary).ok());
  REQUIRE(s->put("t", "a", "2").ok());
  REQUIRE(s->put("other", "a", "x").ok());

  auto a = s->get("t", "a");
  REQUIRE(a.ok());
  REQUIRE(a->has_value());
  CHECK(**a == "2");
  CHECK(**s->get("t", "b") == binary);
  CHECK_FALSE(s->get("t", "missing")->has_value());
  CHECK_FALSE(s->get("no-table", "a")->has_value());

  auto all = s->get_all("t");
  REQUIRE(all.ok());
  std::sort(all->begin(), all->end());
  REQUIRE(all->size() == 2);
  CHECK((*all)[0] == std::make_pair(std::string("a"), std::string("2")));
  CHECK((*all)[1].second == binary);
  // keys: the table's keys without their values; get_many: some rows in the order asked, absent ones empty.
  auto keys = s->keys("t");
  REQUIRE(keys.ok());
  std::sort(keys->begin(), keys->end());
  CHECK(*keys == std::vector<std::string>{"a", "b"});
  CHECK(s->keys("empty")->empty());
  auto some = s->get_many("t", {"b", "gone", "a"});
  REQUIRE(some.ok());
  REQUIRE(some->size() == 3);
  CHECK((*some)[0] == std::optional<std::string>(binary));
  CHECK_FALSE((*some)[1].has_value());
  CHECK((*some)[2] == std::optional<std::string>("2"));
  CHECK(s->get_many("t", {})->empty());

  REQUIRE(s->remove("t", "a").ok());
  REQUIRE(s->remove("t", "a").ok());
  CHECK_FALSE(s->get("t", "a")->has_value());
  CHECK(s->get_all("t")->size() == 1);
  CHECK(s->get_all("empty")->empty());
  CHECK(s->ping().ok());
  // remove_many: one HDEL for several keys, absent ones no error.
  REQUIRE(s->put("t", "c", "3").ok());
  REQUIRE(s->put("t", "d", "4").ok());
  REQUIRE(s->remove_many("t", {"c", "gone", "d"}).ok());
  REQUIRE(s->remove_many("t", {}).ok());
  CHECK_FALSE(s->get("t", "c")->has_value());
  CHECK_FALSE(s->get("t", "d")->has_value());
  CHECK(s->get_all("t")->size() == 1);

  // Keys follow the documented layout.
  auto raw = s->client().command({"HGET", "t-table:t:t", "b"});
  REQUIRE(raw.ok());
  CHECK(raw->str == binary);
}

TEST_CASE("redis store: put_if_absent stores only the first value", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-absent");
  CHECK(*s->put_if_absent("t", "k", "first"));
  CHECK_FALSE(*s->put_if_absent("t", "k", "second"));
  CHECK(**s->get("t", "k") == "first");
}

TEST_CASE("redis store: compare_and_set replaces only the expected value", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-cas");
  CHECK_FALSE(*s->compare_and_set("t", "k", "", "x"));  // absent key: never replaced
  CHECK_FALSE(s->get("t", "k")->has_value());
  const std::string binary("\0\xff\r\n", 4);
  REQUIRE(s->put("t", "k", binary).ok());
  CHECK_FALSE(*s->compare_and_set("t", "k", std::string("\0", 1), "x"));  // a prefix is not equal
  CHECK(*s->compare_and_set("t", "k", binary, binary + "y"));
  CHECK(**s->get("t", "k") == binary + "y");
  CHECK(s->compare_and_set("bad name", "k", "", "").status().code() == Code::invalid_argument);
}

TEST_CASE("redis store: racing compare_and_set loops on separate connections lose no update", "[gcs][redis]") {
  std::vector<std::unique_ptr<RedisStore>> stores;
  for (int i = 0; i < 4; ++i) stores.push_back(connect_store(shared_redis(), "t-cas-race"));
  testing::race_compare_and_set([&](int t) -> Store& { return *stores[static_cast<size_t>(t)]; }, 4, 200);
}

TEST_CASE("redis store: bad names are invalid_argument", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-names");
  CHECK(s->put("", "k", "v").code() == Code::invalid_argument);
  CHECK(s->put("a:b", "k", "v").code() == Code::invalid_argument);
  CHECK(s->publish("a b", "m").code() == Code::invalid_argument);
  CHECK(s->read_after("log", "yesterday", 5).status().code() == Code::invalid_argument);
}

TEST_CASE("redis store: streams are bounded, ordered and readable after an id", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-stream");
  std::vector<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    auto id = s->append("log", "v" + std::to_string(i), 100);
    REQUIRE(id.ok());
    ids.push_back(*id);
  }
  // Approximate trimming: at least max_len, at most max_len + one stream node (100 entries).
  auto all = s->read_after("log", "", 100000);
  REQUIRE(all.ok());
  CHECK(all->size() >= 100);
  CHECK(all->size() <= 200);
  CHECK(all->back().value == "v999");

  auto recent = s->read_recent("log", 3);
  REQUIRE(recent.ok());
  REQUIRE(recent->size() == 3);
  CHECK((*recent)[0].value == "v997");
  CHECK((*recent)[2].value == "v999");
  CHECK((*recent)[2].id == ids.back());

  auto after = s->read_after("log", ids[995], 2);
  REQUIRE(after.ok());
  REQUIRE(after->size() == 2);
  CHECK((*after)[0].value == "v996");
  CHECK((*after)[1].value == "v997");
  CHECK(s->read_after("log", ids.back(), 10)->empty());
  CHECK(s->read_recent("nothing", 5)->empty());

  auto unbounded = s->append("forever", "x", 0);
  CHECK(unbounded.ok());
}

TEST_CASE("redis store: subscribers receive notifications, and next() returns empty on timeout", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-pubsub");
  auto sub = s->subscribe({"nodes", "jobs"});
  REQUIRE(sub.ok());

  auto none = (*sub)->next(100ms);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  REQUIRE(s->publish("actors", "not subscribed").ok());
  REQUIRE(s->publish("jobs", std::string("j\0" "1", 3)).ok());
  REQUIRE(s->publish("nodes", "n1").ok());
  auto n = (*sub)->next(5s);
  REQUIRE(n.ok());
  REQUIRE(n->has_value());
  CHECK((*n)->channel == "jobs");
  CHECK((*n)->message == std::string("j\0" "1", 3));
  n = (*sub)->next(5s);
  REQUIRE(n->has_value());
  CHECK((*n)->channel == "nodes");
  CHECK_FALSE((*sub)->next(50ms)->has_value());

  // A subscriber of one prefix hears nothing of another's.
  auto other = connect_store(shared_redis(), "t-pubsub-other");
  REQUIRE(other->publish("nodes", "elsewhere").ok());
  CHECK_FALSE((*sub)->next(50ms)->has_value());
}

TEST_CASE("redis client: a pipeline returns every reply in order, error replies as values", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-pipe");
  RedisClient& c = s->client();
  std::vector<std::vector<std::string>> cmds;
  for (int i = 0; i < 100; ++i) cmds.push_back({"SET", "t-pipe:k" + std::to_string(i), std::to_string(i)});
  cmds.push_back({"INCR", "t-pipe:k7"});
  cmds.push_back({"HGET", "t-pipe:k1", "f"});  // WRONGTYPE
  cmds.push_back({"GET", "t-pipe:k99"});
  auto replies = c.pipeline(cmds);
  REQUIRE(replies.ok());
  REQUIRE(replies->size() == 103);
  CHECK((*replies)[0].type == Reply::Type::status);
  CHECK((*replies)[100].integer == 8);
  CHECK((*replies)[101].is_error());
  Status wrong = c.check((*replies)[101], cmds[101]);
  CHECK(wrong.code() == Code::corrupt_data);
  CHECK_THAT(wrong.message(), Catch::Contains("WRONGTYPE"));
  CHECK_THAT(wrong.message(), Catch::Contains(c.address()));
  CHECK((*replies)[102].str == "99");

  // command() turns an error reply into a Status naming the server and the command.
  auto bad = c.command({"NOSUCHCOMMAND", "x"});
  CHECK(bad.status().code() == Code::internal);
  CHECK_THAT(bad.status().message(), Catch::Contains("NOSUCHCOMMAND"));
}

TEST_CASE("redis client: a reply that does not come in time is a timeout and the client recovers", "[gcs][redis]") {
  RedisOptions o = shared_redis().client_options();
  o.command_timeout = 200ms;
  auto c = RedisClient::connect(o);
  REQUIRE(c.ok());
  auto blocked = (*c)->command({"BLPOP", "t-timeout:empty-list", "5"});
  CHECK(blocked.status().code() == Code::timeout);
  CHECK_THAT(blocked.status().message(), Catch::Contains("BLPOP"));
  auto pong = (*c)->command({"PING"});
  REQUIRE(pong.ok());
  CHECK(pong->str == "PONG");
}

TEST_CASE("table over redis: typed records, put_many, and a malformed record named by key", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-records");
  Table<NodeRecord> nodes(*s);
  auto sub = s->subscribe({"nodes"});
  REQUIRE(sub.ok());

  std::vector<NodeRecord> many(20);
  for (int i = 0; i < 20; ++i) {
    many[i].id = NodeId::random();
    many[i].pid = i;
    many[i].gpus = {{0, "gpu", 1}};
  }
  REQUIRE(nodes.put_many(many).ok());
  auto listed = nodes.list();
  REQUIRE(listed.ok());
  CHECK(listed->size() == 20);
  auto got = nodes.get(many[7].id.hex());
  REQUIRE(got.ok());
  CHECK(got->pid == 7);
  auto n = (*sub)->next(5s);
  REQUIRE(n->has_value());
  CHECK((*n)->channel == "nodes");

  REQUIRE(s->client().command({"HSET", s->table_key("nodes"), "bad-node", "\xc1garbage"}).ok());
  Status st = nodes.get("bad-node").status();
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("nodes/bad-node"));
  st = nodes.list().status();
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("nodes/bad-node"));

  // A key of another type where the table belongs: corrupt_data naming the key.
  REQUIRE(s->client().command({"SET", s->table_key("jobs"), "a string"}).ok());
  st = Table<JobRecord>(*s).list().status();
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::Contains("t-records:t:jobs"));
}

TEST_CASE("events over redis: recorded events and metrics come back in order", "[gcs][redis]") {
  auto s = connect_store(shared_redis(), "t-events");
  for (int i = 0; i < 5; ++i) {
    REQUIRE(record_event(*s, {0, "job_progress", "job" + std::to_string(i), "step " + std::to_string(i)}).ok());
  }
  REQUIRE(record_metric(*s, {0, "loss", 0.5}).ok());
  auto ev = recent_events(*s, 3);
  REQUIRE(ev.ok());
  REQUIRE(ev->size() == 3);
  CHECK((*ev)[0].subject == "job2");
  CHECK((*ev)[2].message == "step 4");
  CHECK((*ev)[2].time_ms > 0);
  auto m = recent_metrics(*s, 10);
  REQUIRE(m.ok());
  REQUIRE(m->size() == 1);
  CHECK((*m)[0].value == 0.5);
}

}  // namespace troupe::gcs
