#include "data/shards/shard_plan.h"

#include <algorithm>
#include <limits>

#include "core/splitmix.h"
#include "data/feed/epoch_order.h"  // epoch_permutation: the shuffle `troupe train` uses

namespace troupe::data {
namespace {

// Fisher-Yates with our own draw (not std::shuffle / uniform_int_distribution, whose algorithms
// differ between standard libraries): the same plan on every node whatever it was built with.
void shuffle(std::vector<int32_t>& v, uint64_t state) {
  for (size_t i = v.size(); i > 1; --i) {
    state = splitmix64(state);
    // Multiply-shift maps 64 random bits onto [0, i) with a bias below i / 2^64: negligible here.
    const size_t j = static_cast<size_t>((static_cast<unsigned __int128>(state) * i) >> 64);
    std::swap(v[i - 1], v[j]);
  }
}

std::vector<std::vector<int32_t>> contiguous(const std::vector<int32_t>& order, int shards) {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(shards));
  const int64_t n = static_cast<int64_t>(order.size());
  for (int s = 0; s < shards; ++s) {
    // Shard s is [s*n/S, (s+1)*n/S): sizes differ by at most 1.
    const int64_t begin = s * n / shards, end = (s + 1) * n / shards;
    out[static_cast<size_t>(s)].assign(order.begin() + begin, order.begin() + end);
  }
  return out;
}

std::vector<std::vector<int32_t>> interleaved(const std::vector<int32_t>& order, int shards, int64_t block) {
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(shards));
  const int64_t n = static_cast<int64_t>(order.size());
  for (int64_t b = 0; b * block < n; ++b) {
    auto& shard = out[static_cast<size_t>(b % shards)];
    const int64_t begin = b * block, end = std::min(n, begin + block);
    shard.insert(shard.end(), order.begin() + begin, order.begin() + end);
  }
  return out;
}

std::vector<std::vector<int32_t>> stratified(const std::vector<int32_t>& labels, int classes, int shards,
                                             uint64_t seed, int epoch) {
  std::vector<std::vector<int32_t>> by_class(static_cast<size_t>(classes));
  for (size_t i = 0; i < labels.size(); ++i) by_class[static_cast<size_t>(labels[i])].push_back(static_cast<int32_t>(i));
  // Mixed, not added: seed + epoch would make (seed 1, epoch 2) equal (seed 2, epoch 1).
  const uint64_t epoch_state = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch)));
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(shards));
  // One dealer position across all classes: class c starts where class c-1 stopped, so besides the
  // per-class counts being floor/ceil(n_c / S), the shard sizes differ by at most 1.
  size_t next = 0;
  for (int c = 0; c < classes; ++c) {
    auto& members = by_class[static_cast<size_t>(c)];
    shuffle(members, epoch_state ^ splitmix64(static_cast<uint64_t>(c) + 1));
    for (int32_t i : members) {
      out[next].push_back(i);
      next = (next + 1) % out.size();
    }
  }
  // Dealt class by class, a shard is sorted by class: shuffle it so every batch mixes the classes.
  for (size_t s = 0; s < out.size(); ++s) shuffle(out[s], epoch_state ^ splitmix64(~static_cast<uint64_t>(s)));
  return out;
}

}  // namespace

const char* shard_policy_name(ShardPolicy p) {
  switch (p) {
    case ShardPolicy::contiguous: return "contiguous";
    case ShardPolicy::stratified: return "stratified";
    case ShardPolicy::interleaved: return "interleaved";
  }
  return "unknown";
}

Expected<ShardPolicy> parse_shard_policy(const std::string& text) {
  for (ShardPolicy p : {ShardPolicy::contiguous, ShardPolicy::stratified, ShardPolicy::interleaved}) {
    if (text == shard_policy_name(p)) return p;
  }
  return invalid_argument("unknown --shard-policy '" + text + "': the policies are contiguous, stratified and " +
                          "interleaved");
}

int64_t ShardPlan::examples() const {
  int64_t n = 0;
  for (const auto& s : shards) n += static_cast<int64_t>(s.size());
  return n;
}

std::vector<int64_t> ShardPlan::shard_sizes() const {
  std::vector<int64_t> sizes;
  sizes.reserve(shards.size());
  for (const auto& s : shards) sizes.push_back(static_cast<int64_t>(s.size()));
  return sizes;
}

Expected<ShardPlan> plan_epoch(int64_t examples, const std::vector<int32_t>& labels, int classes,
                               const ShardPlanOptions& o, int epoch) {
  if (examples < 1 || examples > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("shard plan: " + std::to_string(examples) + " examples; expected 1 .. 2^31-1");
  }
  if (o.shards < 1 || o.shards > examples) {
    return invalid_argument("shard plan: " + std::to_string(o.shards) + " shards for " + std::to_string(examples) +
                            " examples; expected 1 .. " + std::to_string(examples) + " (lower --shards)");
  }
  if (o.block < 1) return invalid_argument("shard plan: block " + std::to_string(o.block) + "; expected >= 1");
  ShardPlan plan;
  plan.epoch = epoch;
  switch (o.policy) {
    case ShardPolicy::contiguous:
      plan.shards = contiguous(epoch_permutation(examples, o.seed, epoch), o.shards);
      break;
    case ShardPolicy::interleaved:
      plan.shards = interleaved(epoch_permutation(examples, o.seed, epoch), o.shards, o.block);
      break;
    case ShardPolicy::stratified: {
      if (static_cast<int64_t>(labels.size()) != examples) {
        return invalid_argument("shard plan: the stratified policy needs one label per example; got " +
                                std::to_string(labels.size()) + " labels for " + std::to_string(examples) +
                                " examples");
      }
      if (classes < 1) return invalid_argument("shard plan: " + std::to_string(classes) + " classes; expected >= 1");
      for (size_t i = 0; i < labels.size(); ++i) {
        if (labels[i] < 0 || labels[i] >= classes) {
          return invalid_argument("shard plan: label " + std::to_string(labels[i]) + " of example " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(classes) + ")");
        }
      }
      plan.shards = stratified(labels, classes, o.shards, o.seed, epoch);
      break;
    }
  }
  return plan;
}

}  // namespace troupe::data
