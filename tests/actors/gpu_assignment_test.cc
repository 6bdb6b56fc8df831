// GpuAssignments: whole demands take free devices lowest first, shares pack by best fit, bad demands
// are refused, a demand that does not fit names every device's usage and changes nothing, release
// gives devices back, and lookups from other threads are safe.
#include "actors/gpu_assignment.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

using namespace troupe;
using namespace troupe::actors;

namespace {

using Devices = std::vector<int>;

Devices must_assign(GpuAssignments& g, const ActorId& a, double gpus) {
  auto d = g.assign(a, gpus);
  INFO(d.status().to_string());
  REQUIRE(d.ok());
  return *d;
}

}  // namespace

TEST_CASE("gpu assignment: whole demands take entirely free devices, lowest first", "[actors][gpus]") {
  GpuAssignments g(NodeId::random(), 4);
  const ActorId a = ActorId::random(), b = ActorId::random(), c = ActorId::random();
  CHECK(must_assign(g, a, 1) == Devices{0});
  CHECK(must_assign(g, b, 2) == Devices{1, 2});
  CHECK(g.devices_of(b) == Devices{1, 2});
  CHECK(g.usage() == std::vector<double>{1, 1, 1, 0});
  g.release(a);
  CHECK(g.devices_of(a).empty());
  CHECK(must_assign(g, c, 2) == Devices{0, 3});  // not contiguous: any two free devices
  CHECK(g.usage() == std::vector<double>{1, 1, 1, 1});
}

TEST_CASE("gpu assignment: a zero demand gets no device, even on a node without GPUs", "[actors][gpus]") {
  GpuAssignments none(NodeId::random(), 0);
  CHECK(must_assign(none, ActorId::random(), 0).empty());
  auto refused = none.assign(ActorId::random(), 0.5);
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == Code::unavailable);
  CHECK_THAT(refused.status().message(), Catch::Contains("it offers none"));
}

TEST_CASE("gpu assignment: shares pack onto the most used device that fits", "[actors][gpus]") {
  GpuAssignments g(NodeId::random(), 3);
  const ActorId whole = ActorId::random();
  CHECK(must_assign(g, whole, 1) == Devices{0});
  CHECK(must_assign(g, ActorId::random(), 0.5) == Devices{1});   // device 0 is full: the next free one
  CHECK(must_assign(g, ActorId::random(), 0.25) == Devices{1});  // best fit: 1 is used more than 2
  CHECK(must_assign(g, ActorId::random(), 0.5) == Devices{2});   // 1 has only 0.25 left
  CHECK(must_assign(g, ActorId::random(), 0.25) == Devices{1});  // fills 1 exactly
  CHECK(g.usage() == std::vector<double>{1, 1, 0.5});
  // Shares that sum to exactly 1 in floating point (0.1 ten times) still fit.
  GpuAssignments tenths(NodeId::random(), 1);
  for (int i = 0; i < 10; ++i) CHECK(must_assign(tenths, ActorId::random(), 0.1) == Devices{0});
  CHECK(!tenths.assign(ActorId::random(), 0.1).ok());
}

TEST_CASE("gpu assignment: no fit names every device's usage and changes nothing", "[actors][gpus]") {
  const NodeId node = NodeId::random();
  GpuAssignments g(node, 2);
  must_assign(g, ActorId::random(), 0.5);
  must_assign(g, ActorId::random(), 0.5);  // packs onto device 0
  must_assign(g, ActorId::random(), 0.5);  // device 1
  // The head counts 0.5 GPUs free on this node, but no device is whole.
  auto one = g.assign(ActorId::random(), 1);
  REQUIRE(!one.ok());
  CHECK(one.status().code() == Code::unavailable);
  CHECK(one.status().message() ==
        "no whole GPU free on node " + node.short_hex() + " (device 0: 1 used, device 1: 0.5 used)");

  auto share = g.assign(ActorId::random(), 0.75);
  REQUIRE(!share.ok());
  CHECK_THAT(share.status().message(), Catch::Contains("no GPU on node " + node.short_hex() + " has 0.75 free") &&
                                           Catch::Contains("device 1: 0.5 used"));

  GpuAssignments two(node, 2);
  must_assign(two, ActorId::random(), 1);
  const ActorId refused = ActorId::random();
  auto pair = two.assign(refused, 2);
  REQUIRE(!pair.ok());
  CHECK(pair.status().message() ==
        "needs 2 whole GPUs, 1 free on node " + node.short_hex() + " (device 0: 1 used, device 1: free)");
  CHECK(two.devices_of(refused).empty());
  CHECK(two.usage() == std::vector<double>{1, 0});
}

TEST_CASE("gpu assignment: bad demands are invalid_argument", "[actors][gpus]") {
  GpuAssignments g(NodeId::random(), 4);
  for (double bad : {1.5, 2.25, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    INFO("demand " << bad);
    auto r = g.assign(ActorId::random(), bad);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == Code::invalid_argument);
  }
  auto r = g.assign(ActorId::random(), 1.5);
  CHECK_THAT(r.status().message(), Catch::Contains("a demand above 1 GPU must be a whole number"));
  CHECK(check_gpu_demand(1.5, "--gpus").message().rfind("--gpus 1.5: ", 0) == 0);
  CHECK(check_gpu_demand(0.3, "--gpus").ok());
  CHECK(check_gpu_demand(3, "--gpus").ok());
  CHECK(g.usage() == std::vector<double>{0, 0, 0, 0});

  // An actor holds one assignment at a time.
  const ActorId a = ActorId::random();
  must_assign(g, a, 1);
  auto again = g.assign(a, 1);
  REQUIRE(!again.ok());
  CHECK(again.status().code() == Code::invalid_argument);
  CHECK_THAT(again.status().message(), Catch::Contains("already holds GPUs"));
}

TEST_CASE("gpu assignment: releases give shares back and unknown releases do nothing", "[actors][gpus]") {
  GpuAssignments g(NodeId::random(), 1);
  const ActorId a = ActorId::random(), b = ActorId::random(), c = ActorId::random();
  must_assign(g, a, 0.1);
  must_assign(g, b, 0.2);
  must_assign(g, c, 0.7);
  g.release(a);
  g.release(c);
  g.release(b);
  g.release(ActorId::random());
  CHECK(g.usage() == std::vector<double>{0});  // no rounding dust left behind
  CHECK(must_assign(g, a, 1) == Devices{0});
}

TEST_CASE("gpu assignment: lookups from other threads while the owner assigns and releases",
          "[actors][gpus]") {
  GpuAssignments g(NodeId::random(), 2);
  const ActorId fixed = ActorId::random();
  must_assign(g, fixed, 1);
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    while (!done) {
      if (g.devices_of(fixed) != Devices{0}) ++wrong;
    }
  });
  for (int i = 0; i < 2000; ++i) {
    const ActorId a = ActorId::random();
    auto d = g.assign(a, 0.5);
    if (!d.ok() || *d != Devices{1}) ++wrong;
    g.release(a);
  }
  done = true;
  reader.join();
  CHECK(wrong == 0);
}
