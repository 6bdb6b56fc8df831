// A parameter shard's push history (trainers/ps/push_history.h): per rank, bounded, in clock
// order; complete only when nothing after the asked clock was dropped; a restored shard knows
// nothing before its record's last push. And over TCP: the history op answers what the shard
// applied (ps_wire.h "tps4").
#include <catch2/catch.hpp>

#include "trainers/ps/ps_client.h"
#include "trainers/ps/ps_server.h"
#include "trainers/ps/push_history.h"

using namespace troupe;
using namespace troupe::ps;

namespace {
DataTag tag(int shard, int64_t offset) { return {DataSpan{1, shard, offset, 32}}; }
}  // namespace

TEST_CASE("push history: a rank's pushes after a clock, in order, complete while none were dropped", "[ps][history]") {
  PushHistory h(2, 4);
  for (int64_t c = 0; c < 3; ++c) h.add(0, c, tag(0, 32 * c));
  h.add(1, 0, tag(1, 0));
  PushesAfter a = h.after(0, 0);
  CHECK(a.complete);
  REQUIRE(a.pushes.size() == 2u);
  CHECK(a.pushes[0].clock == 1);
  CHECK(a.pushes[1].clock == 2);
  CHECK(a.pushes[1].tag == tag(0, 64));
  CHECK(h.after(1, -1).pushes.size() == 1u);  // ranks apart
  // Bounded: 4 kept, so clocks 0 and 1 are dropped; asking from before them is incomplete.
  for (int64_t c = 3; c < 6; ++c) h.add(0, c, tag(0, 32 * c));
  CHECK(h.after(0, 1).complete);
  CHECK(h.after(0, 1).pushes.front().clock == 2);
  CHECK_FALSE(h.after(0, 0).complete);
  CHECK_FALSE(h.after(0, -1).complete);
  // A replay of a kept clock takes its place; one of a dropped clock is not kept.
  h.add(0, 3, tag(2, 0));
  CHECK(h.after(0, 2).pushes.front().tag == tag(2, 0));
  CHECK(h.after(0, 2).pushes.size() == 3u);
  h.add(0, 0, tag(3, 0));
  CHECK(h.after(0, 1).pushes.size() == 4u);
  // Out of range, or keeping nothing: never complete.
  CHECK_FALSE(h.after(5, 0).complete);
  PushHistory none(1);
  none.add(0, 0, tag(0, 0));
  CHECK_FALSE(none.after(0, -1).complete);
  CHECK(none.after(0, -1).pushes.empty());
}

TEST_CASE("push history: a restored shard's starts after its record, and replays fill it in", "[ps][history]") {
  PushHistory h(1, 16);
  h.known_from(0, 7);
  CHECK_FALSE(h.after(0, 6).complete);  // pushes up to 7 are not known here
  CHECK(h.after(0, 7).complete);
  h.add(0, 5, tag(0, 0));  // older than what it knows: not kept
  h.add(0, 8, tag(0, 256));
  h.add(0, 9, tag(0, 288));
  REQUIRE(h.after(0, 7).pushes.size() == 2u);
  CHECK(h.after(0, 7).pushes[0].clock == 8);
}

TEST_CASE("push history over TCP: a checkpointing async shard answers the history op with what it applied",
          "[ps][history][tcp]") {
  ShardOptions so;
  so.mode = PsMode::async;
  so.workers = 1;
  so.staleness = -1;
  so.shards = 1;
  auto shard = ParameterShard::create(0, ShardRange{0, 4}, std::vector<float>(4, 0.0f), so);
  REQUIRE(shard.ok());
  ShardCheckpointing c;
  c.every = 1000;  // never reached: only the history's size follows from it
  c.dir = "/nonexistent-never-written";
  c.tag = "t";
  REQUIRE((*shard)->enable_checkpoints(c).ok());
  auto server = PsServer::start(std::move(*shard), PsServerOptions{"job-h"});
  REQUIRE(server.ok());
  PsClientOptions co;
  co.job = "job-h";
  auto client = connect_ps({(*server)->address()}, co);
  REQUIRE(client.ok());
  std::vector<float> p(4), g(4, 0.5f);
  for (int64_t clock = 0; clock < 3; ++clock) {
    auto v = (*client)->pull(clock, p.data());
    REQUIRE(v.ok());
    REQUIRE((*client)->push(clock, g.data(), *v, DataTag{DataSpan{0, 2, 32 * clock, 32}}).ok());
  }
  auto history = (*client)->pushes_after(0, 0);
  REQUIRE(history.ok());
  CHECK(history->complete);
  REQUIRE(history->pushes.size() == 2u);
  CHECK(history->pushes[0].clock == 1);
  CHECK(history->pushes[1].tag == (DataTag{DataSpan{0, 2, 64, 32}}));
  CHECK_FALSE((*client)->pushes_after(3, 0).ok());  // no such shard
  (*server)->stop();
}
