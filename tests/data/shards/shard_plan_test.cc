// Shard plans: deterministic from (seed, epoch), every example in exactly one shard, stratified
// shards with a representative class mix, interleaved shards that rebuild the trainer's batches.
#include "data/shards/shard_plan.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "trainers/local/local_trainer.h"

namespace troupe::data {
namespace {

// Labels of an unbalanced 10-class set: class c has 50 + 37 c examples, in a scrambled order.
std::vector<int32_t> unbalanced_labels() {
  std::vector<int32_t> labels;
  for (int c = 0; c < 10; ++c) labels.insert(labels.end(), 50 + 37 * c, c);
  for (size_t i = 0; i < labels.size(); ++i) std::swap(labels[i], labels[(i * 7919) % labels.size()]);
  return labels;
}

ShardPlan plan(int64_t n, const std::vector<int32_t>& labels, ShardPolicy policy, int shards, uint64_t seed,
               int epoch, int64_t block = 1) {
  ShardPlanOptions o;
  o.shards = shards;
  o.policy = policy;
  o.seed = seed;
  o.block = block;
  auto p = plan_epoch(n, labels, 10, o, epoch);
  INFO(p.status().to_string());
  REQUIRE(p.ok());
  return std::move(p.value());
}

// Every index of [0, n) appears in exactly one shard, exactly once.
void check_partition(const ShardPlan& p, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const auto& shard : p.shards) {
    for (int32_t i : shard) {
      REQUIRE(i >= 0);
      REQUIRE(i < n);
      ++seen[static_cast<size_t>(i)];
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  CHECK(p.examples() == n);
}

}  // namespace

TEST_CASE("shard plan: every policy covers every example exactly once, in shards within 1 of equal", "[data][plan]") {
  const auto labels = unbalanced_labels();
  const int64_t n = static_cast<int64_t>(labels.size());
  for (ShardPolicy policy : {ShardPolicy::contiguous, ShardPolicy::stratified, ShardPolicy::interleaved}) {
    for (int shards : {1, 3, 8, 64}) {
      INFO(shard_policy_name(policy) << " with " << shards << " shards");
      ShardPlan p = plan(n, labels, policy, shards, 42, 1);
      REQUIRE(p.shards.size() == static_cast<size_t>(shards));
      check_partition(p, n);
      auto sizes = p.shard_sizes();
      CHECK(*std::max_element(sizes.begin(), sizes.end()) - *std::min_element(sizes.begin(), sizes.end()) <= 1);
    }
  }
}

TEST_CASE("shard plan: the same seed and epoch give the same plan, another epoch or seed another", "[data][plan]") {
  const auto labels = unbalanced_labels();
  const int64_t n = static_cast<int64_t>(labels.size());
  for (ShardPolicy policy : {ShardPolicy::contiguous, ShardPolicy::stratified, ShardPolicy::interleaved}) {
    INFO(shard_policy_name(policy));
    CHECK(plan(n, labels, policy, 4, 7, 2).shards == plan(n, labels, policy, 4, 7, 2).shards);
    CHECK(plan(n, labels, policy, 4, 7, 2).shards != plan(n, labels, policy, 4, 7, 3).shards);
    CHECK(plan(n, labels, policy, 4, 7, 2).shards != plan(n, labels, policy, 4, 8, 2).shards);
  }
}

TEST_CASE("shard plan: contiguous with one shard is the order troupe train visits", "[data][plan]") {
  ShardPlan p = plan(1000, {}, ShardPolicy::contiguous, 1, 5, 3);
  CHECK(p.shards[0] == epoch_permutation(1000, 5, 3));
  // And S shards are its consecutive slices.
  ShardPlan four = plan(1000, {}, ShardPolicy::contiguous, 4, 5, 3);
  std::vector<int32_t> joined;
  for (const auto& s : four.shards) joined.insert(joined.end(), s.begin(), s.end());
  CHECK(joined == p.shards[0]);
}

TEST_CASE("shard plan: stratified shards hold every class within 1 of proportional, mixed in order", "[data][plan]") {
  const auto labels = unbalanced_labels();
  const int64_t n = static_cast<int64_t>(labels.size());
  std::vector<int64_t> total(10, 0);
  for (int32_t l : labels) ++total[static_cast<size_t>(l)];
  for (int shards : {2, 7, 16}) {
    ShardPlan p = plan(n, labels, ShardPolicy::stratified, shards, 11, 4);
    for (int s = 0; s < shards; ++s) {
      std::vector<int64_t> hist(10, 0);
      for (int32_t i : p.shards[static_cast<size_t>(s)]) ++hist[static_cast<size_t>(labels[static_cast<size_t>(i)])];
      for (int c = 0; c < 10; ++c) {
        const double proportional = static_cast<double>(total[static_cast<size_t>(c)]) / shards;
        INFO("shards " << shards << ", shard " << s << ", class " << c);
        CHECK(std::abs(static_cast<double>(hist[static_cast<size_t>(c)]) - proportional) <= 1.0);
      }
      // Not sorted by class: the first 20 examples of a shard already show several classes.
      std::vector<int32_t> head;
      for (size_t k = 0; k < 20; ++k) head.push_back(labels[static_cast<size_t>(p.shards[static_cast<size_t>(s)][k])]);
      std::sort(head.begin(), head.end());
      CHECK(std::unique(head.begin(), head.end()) - head.begin() >= 4);
    }
  }
}

TEST_CASE("shard plan: interleaved shards give back the trainer's global batches", "[data][plan]") {
  // 4 replicas of per-replica batch 32: the t-th blocks of the 4 shards are the t-th batch of 128.
  const int64_t n = 1000;
  ShardPlan p = plan(n, {}, ShardPolicy::interleaved, 4, 9, 2, 32);
  const auto order = epoch_permutation(n, 9, 2);
  for (size_t t = 0; t < n / 128; ++t) {
    std::vector<int32_t> global(order.begin() + static_cast<long>(t * 128), order.begin() + static_cast<long>((t + 1) * 128));
    std::vector<int32_t> from_shards;
    for (const auto& s : p.shards) from_shards.insert(from_shards.end(), s.begin() + static_cast<long>(t * 32), s.begin() + static_cast<long>((t + 1) * 32));
    CHECK(from_shards == global);
  }
}

TEST_CASE("shard plan: bad options are invalid_argument naming the value", "[data][plan]") {
  ShardPlanOptions o;
  o.shards = 0;
  CHECK_THAT(plan_epoch(10, {}, 10, o, 1).status().message(), Catch::Contains("0 shards for 10 examples"));
  o.shards = 11;
  CHECK(plan_epoch(10, {}, 10, o, 1).status().code() == Code::invalid_argument);
  o.shards = 2;
  o.block = 0;
  CHECK_THAT(plan_epoch(10, {}, 10, o, 1).status().message(), Catch::Contains("block 0"));
  o.block = 1;
  o.policy = ShardPolicy::stratified;
  CHECK_THAT(plan_epoch(10, {1, 2}, 10, o, 1).status().message(), Catch::Contains("one label per example"));
  CHECK_THAT(plan_epoch(2, {1, 10}, 10, o, 1).status().message(), Catch::Contains("label 10 of example 1"));
  CHECK(plan_epoch(0, {}, 10, ShardPlanOptions{}, 1).status().code() == Code::invalid_argument);
}

TEST_CASE("shard plan: policies parse by name and an unknown one lists them", "[data][plan]") {
  CHECK(*parse_shard_policy("stratified") == ShardPolicy::stratified);
  CHECK(*parse_shard_policy("contiguous") == ShardPolicy::contiguous);
  CHECK(*parse_shard_policy("interleaved") == ShardPolicy::interleaved);
  Status st = parse_shard_policy("random").status();
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("'random'"));
  CHECK_THAT(st.message(), Catch::Contains("contiguous, stratified and interleaved"));
}

}  // namespace troupe::data
