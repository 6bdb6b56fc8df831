// The parameter-server partition (trainers/ps/ps_partition.h): contiguous ranges balanced by bytes,
// blocks split where needed, and the shard counts that cannot work refused.
#include <catch2/catch.hpp>

#include "trainers/ps/ps_partition.h"

using namespace troupe;
using namespace troupe::ps;

TEST_CASE("ps partition: the MLP's parameters split into contiguous ranges within one float of each other",
          "[ps][partition]") {
  const size_t mlp = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10;  // 235146
  for (int shards : {1, 2, 3, 7, 64}) {
    auto ranges = partition_parameters(mlp, shards);
    REQUIRE(ranges.ok());
    REQUIRE(ranges->size() == static_cast<size_t>(shards));
    size_t lo = mlp, hi = 0, next = 0;
    for (const ShardRange& r : *ranges) {
      CHECK(r.begin == next);
      next = r.end;
      lo = std::min(lo, r.size());
      hi = std::max(hi, r.size());
    }
    CHECK(next == mlp);
    CHECK(hi - lo <= 1);
  }
}

TEST_CASE("ps partition: the first matrix is split, so two shards each hold half the bytes", "[ps][partition]") {
  ParameterSpace space;
  space.declare("w1", {784, 256}, Init::zeros());
  space.declare("b1", {256}, Init::zeros());
  space.declare("w2", {256, 10}, Init::zeros());
  space.declare("b2", {10}, Init::zeros());
  auto ranges = partition_parameters(space.size(), 2);
  REQUIRE(ranges.ok());
  CHECK((*ranges)[0].size() == space.size() / 2);
  CHECK(describe_range(space, (*ranges)[0]) == "w1[0:101765]");
  CHECK(describe_range(space, (*ranges)[1]) == "w1[101765:200704] b1 w2 b2");
}

TEST_CASE("ps partition: as many shards as floats is one float each, fewer than one or more than floats is refused",
          "[ps][partition]") {
  auto one_each = partition_parameters(5, 5);
  REQUIRE(one_each.ok());
  for (size_t i = 0; i < 5; ++i) CHECK((*one_each)[i] == ShardRange{i, i + 1});
  for (int bad : {0, -1}) {
    auto r = partition_parameters(100, bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::invalid_argument);
    CHECK_THAT(r.status().message(), Catch::Contains("at least one"));
  }
  auto too_many = partition_parameters(3, 4);
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().code() == Code::invalid_argument);
  CHECK_THAT(too_many.status().message(), Catch::Contains("4 shards for 3 parameters would leave a shard empty"));
}
