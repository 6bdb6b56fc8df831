// A parameter shard's semantics (trainers/ps/parameter_shard.h), in process: the staleness bound
// holds a fast worker back until the slow one catches up, S = 0 is lockstep, unbounded never waits,
// central mode applies the exact average of the workers' pushes once, and departed workers stop
// holding the others up.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

#include "trainers/ps/parameter_shard.h"

using namespace troupe;
using namespace troupe::ps;
using namespace std::chrono_literals;

namespace {

// SGD without momentum at a constant rate: an update is p -= lr * g, easy to compute by hand.
ShardOptions sgd(PsMode mode, int workers, int64_t staleness = -1, float lr = 0.5f) {
  ShardOptions o;
  o.mode = mode;
  o.workers = workers;
  o.staleness = staleness;
  o.optimizer.name = "sgd";
  o.optimizer.lr = lr;
  o.optimizer.momentum = 0;
  o.total_updates = 1000;
  o.wait_timeout = 5s;
  return o;
}

std::unique_ptr<ParameterShard> shard(const ShardOptions& o, std::vector<float> init = {1, 2, 3, 4}) {
  const size_t n = init.size();
  auto s = ParameterShard::create(0, ShardRange{0, n}, std::move(init), o);
  REQUIRE(s.ok());
  return std::move(*s);
}

// One step of `worker` at `clock`: pull, then push `g` everywhere.
void step(ParameterShard& s, int worker, int64_t clock, float g = 1.0f) {
  std::vector<float> p(s.range().size()), grads(s.range().size(), g);
  auto v = s.pull(worker, clock, p.data());
  REQUIRE(v.ok());
  REQUIRE(s.push(worker, clock, grads.data(), *v).ok());
}

// Starts worker's pull for `clock` on another thread; the future says when it returned.
std::future<Expected<int64_t>> pull_async(ParameterShard& s, int worker, int64_t clock) {
  return std::async(std::launch::async, [&s, worker, clock] {
    std::vector<float> p(s.range().size());
    return s.pull(worker, clock, p.data());
  });
}

bool waits(std::future<Expected<int64_t>>& f) { return f.wait_for(150ms) == std::future_status::timeout; }

}  // namespace

TEST_CASE("ps shard: the staleness bound holds a fast worker until the slow one catches up", "[ps][shard]") {
  auto s = shard(sgd(PsMode::async, 2, /*staleness=*/1));
  step(*s, 0, 0);
  step(*s, 0, 1);  // worker 0 is one clock ahead of worker 1 (at 0): allowed
  auto pull = pull_async(*s, 0, 2);  // two ahead: must wait for worker 1
  CHECK(waits(pull));
  step(*s, 1, 0);
  REQUIRE(pull.wait_for(2s) == std::future_status::ready);
  auto v = pull.get();
  REQUIRE(v.ok());
  CHECK(*v == 3);
}

TEST_CASE("ps shard: a pull that waits too long names the slowest worker and its clock", "[ps][shard][errors]") {
  ShardOptions o = sgd(PsMode::async, 3, 0);
  o.wait_timeout = 200ms;
  auto s = shard(o);
  step(*s, 0, 0);
  step(*s, 1, 0);
  std::vector<float> p(4);
  auto v = s->pull(0, 1, p.data());
  REQUIRE_FALSE(v.ok());
  CHECK(v.status().code() == Code::timeout);
  CHECK_THAT(v.status().message(), Catch::Contains("worker 0's pull for clock 1 waited 200 ms"));
  CHECK_THAT(v.status().message(), Catch::Contains("the slowest worker, 2, is at clock 0"));
}

TEST_CASE("ps shard: S = 0 runs the workers in lockstep", "[ps][shard]") {
  auto s = shard(sgd(PsMode::async, 2, 0));
  for (int64_t c = 0; c < 5; ++c) {
    step(*s, 0, c);
    auto ahead = pull_async(*s, 0, c + 1);
    CHECK(waits(ahead));  // worker 1 has not pushed clock c yet
    step(*s, 1, c);
    REQUIRE(ahead.wait_for(2s) == std::future_status::ready);
    REQUIRE(ahead.get().ok());
  }
  CHECK(s->version() == 10);
}

TEST_CASE("ps shard: unbounded staleness never waits, and the staleness of each update is recorded",
          "[ps][shard]") {
  auto s = shard(sgd(PsMode::async, 2, -1));
  std::vector<float> p(4), g(4, 1.0f);
  auto slow = s->pull(1, 0, p.data());  // worker 1 pulls version 0, then is slow
  REQUIRE(slow.ok());
  for (int64_t c = 0; c < 50; ++c) step(*s, 0, c);  // never blocks
  REQUIRE(s->push(1, 0, g.data(), *slow).ok());     // applied 50 versions late
  const StalenessStats st = s->staleness().stats();
  CHECK(st.count == 51);
  CHECK(st.max == 50);
  CHECK(st.p50 == 0);
  CHECK(st.p99 == 50);
  CHECK(st.mean == Approx(50.0 / 51));
  CHECK(st.buckets.size() == 51);
  CHECK(st.buckets[0] == 50);
  CHECK(st.buckets[50] == 1);
  CHECK(s->version() == 51);
}

TEST_CASE("ps shard: central mode applies the average of the workers' pushes once", "[ps][shard]") {
  auto s = shard(sgd(PsMode::central, 3, -1, 0.5f));
  std::vector<float> p(4);
  const std::vector<std::vector<float>> g = {{1, 0, 2, -4}, {2, 6, 2, 0}, {3, 3, -1, 1}};
  for (int w = 0; w < 3; ++w) REQUIRE(s->pull(w, 0, p.data()).ok());
  for (int w = 0; w < 2; ++w) REQUIRE(s->push(w, 0, g[w].data(), 0).ok());
  auto next = pull_async(*s, 0, 1);
  CHECK(waits(next));  // worker 2 has not pushed clock 0
  CHECK(s->version() == 0);
  REQUIRE(s->push(2, 0, g[2].data(), 0).ok());
  REQUIRE(next.wait_for(2s) == std::future_status::ready);
  REQUIRE(next.get().ok());
  CHECK(s->version() == 1);
  // p -= 0.5 * mean(g): {1,2,3,4} - 0.5 * {2, 3, 1, -1}
  const std::vector<float> want = {0.0f, 0.5f, 2.5f, 4.5f};
  CHECK(s->parameters() == want);
  CHECK(s->staleness().stats().max == 0);
}

TEST_CASE("ps shard: a worker that finished or was removed no longer holds the others up", "[ps][shard]") {
  SECTION("central: the rest are averaged without it") {
    auto s = shard(sgd(PsMode::central, 3, -1, 1.0f), {0, 0});
    const std::vector<float> g0 = {2, 4}, g1 = {4, 8};
    REQUIRE(s->push(0, 0, g0.data(), 0).ok());
    REQUIRE(s->push(1, 0, g1.data(), 0).ok());
    REQUIRE(s->finish_worker(2).ok());
    CHECK(s->parameters() == std::vector<float>{-3, -6});
    std::vector<float> p(2);
    auto v = s->push(2, 1, g0.data(), 1);
    REQUIRE_FALSE(v.ok());
    CHECK_THAT(v.status().message(), Catch::Contains("a push from worker 2, which already finished"));
  }
  SECTION("central: a lost worker stops the shard, and every pull says so") {
    auto s = shard(sgd(PsMode::central, 3, -1, 1.0f), {0, 0});
    const std::vector<float> g = {2, 4};
    REQUIRE(s->push(0, 0, g.data(), 0).ok());
    REQUIRE(s->push(1, 0, g.data(), 0).ok());
    auto waiting = pull_async(*s, 0, 1);
    CHECK(waits(waiting));
    s->remove_worker(2, "its node was killed");
    REQUIRE(waiting.wait_for(2s) == std::future_status::ready);
    auto v = waiting.get();
    REQUIRE_FALSE(v.ok());
    CHECK(v.status().code() == Code::unavailable);
    CHECK_THAT(v.status().message(), Catch::Contains("worker 2 was lost at clock 0 (its node was killed)"));
    CHECK(s->version() == 0);  // the two pushes without worker 2's rows were not applied
    CHECK(s->parameters() == std::vector<float>{0, 0});
    std::vector<float> p(2);
    CHECK(s->pull_final(p.data()).status().code() == Code::unavailable);
  }
  SECTION("async: a removed worker's clock stops counting") {
    auto s = shard(sgd(PsMode::async, 2, 0));
    step(*s, 0, 0);
    auto ahead = pull_async(*s, 0, 1);
    CHECK(waits(ahead));
    s->remove_worker(1, "its connection dropped");
    REQUIRE(ahead.wait_for(2s) == std::future_status::ready);
    REQUIRE(ahead.get().ok());
  }
  SECTION("the final parameters wait for every worker") {
    auto s = shard(sgd(PsMode::async, 2, -1));
    step(*s, 0, 0);
    REQUIRE(s->finish_worker(0).ok());
    auto final_pull = std::async(std::launch::async, [&] {
      std::vector<float> p(4);
      return s->pull_final(p.data());
    });
    CHECK(final_pull.wait_for(150ms) == std::future_status::timeout);
    step(*s, 1, 0);
    REQUIRE(s->finish_worker(1).ok());
    REQUIRE(final_pull.wait_for(2s) == std::future_status::ready);
    auto v = final_pull.get();
    REQUIRE(v.ok());
    CHECK(*v == 2);
  }
}

TEST_CASE("ps shard: pushes out of order, from the future or from unknown workers are refused", "[ps][shard][errors]") {
  auto s = shard(sgd(PsMode::async, 2, -1));
  std::vector<float> g(4, 1.0f);
  step(*s, 0, 0);
  auto again = s->push(0, 0, g.data(), 0);
  REQUIRE_FALSE(again.ok());
  CHECK_THAT(again.status().message(), Catch::Contains("worker 0 pushed clock 0 again"));
  auto future = s->push(1, 0, g.data(), 7);
  REQUIRE_FALSE(future.ok());
  CHECK_THAT(future.status().message(), Catch::Contains("computed from version 7"));
  auto stranger = s->push(5, 0, g.data(), 0);
  REQUIRE_FALSE(stranger.ok());
  CHECK_THAT(stranger.status().message(), Catch::Contains("serves workers 0..1"));
  auto central = shard(sgd(PsMode::central, 2, -1));
  auto early = central->push(0, 3, g.data(), 0);
  REQUIRE_FALSE(early.ok());
  CHECK_THAT(early.status().message(), Catch::Contains("gathers clock 0"));
}

TEST_CASE("ps shard: shutting down wakes a waiting pull with unavailable", "[ps][shard][errors]") {
  auto s = shard(sgd(PsMode::async, 2, 0));
  step(*s, 0, 0);
  auto waiting = pull_async(*s, 0, 1);
  CHECK(waits(waiting));
  s->shut_down("the job was cancelled");
  REQUIRE(waiting.wait_for(2s) == std::future_status::ready);
  auto v = waiting.get();
  REQUIRE_FALSE(v.ok());
  CHECK(v.status().code() == Code::unavailable);
  CHECK_THAT(v.status().message(), Catch::Contains("the job was cancelled"));
}

TEST_CASE("ps shard: an async worker's replacement rejoins at its predecessor's clock, central refuses it",
          "[ps][shard]") {
  auto s = shard(sgd(PsMode::async, 2, 2));
  CHECK(*s->rejoin_worker(0) == 0);  // a first connection
  for (int64_t c = 0; c < 3; ++c) step(*s, 0, c);
  step(*s, 1, 0);
  s->remove_worker(0, "its node died");
  CHECK_FALSE(s->pull(0, 3, std::vector<float>(4).data()).ok());  // removed: refused
  auto clock = s->rejoin_worker(0);
  REQUIRE(clock.ok());
  CHECK(*clock == 3);
  step(*s, 0, 3);  // goes on where its predecessor stopped
  CHECK(s->version() == 5);
  // While live, the staleness bound counts it again: worker 1 at clock 1 may not run past 0 + 2.
  step(*s, 1, 1);
  REQUIRE(s->finish_worker(1).ok());
  // A finished worker connecting again (it waits for the others) stays finished: no more pushes,
  // and finishing again is no error.
  CHECK(*s->rejoin_worker(1) == 2);
  CHECK(s->push(1, 2, std::vector<float>(4).data(), s->version()).status().code() == Code::invalid_argument);
  CHECK(s->finish_worker(1).ok());
  CHECK_FALSE(s->rejoin_worker(7).ok());  // no such rank

  auto central = shard(sgd(PsMode::central, 2));
  central->remove_worker(1, "gone");
  auto refused = central->rejoin_worker(1);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("restarts whole"));
}
