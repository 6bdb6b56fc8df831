// The shard plan of an epoch: which examples of the dataset each shard holds, and in what order a
// worker visits them. A pure function of (examples, labels, options, epoch): every worker and the
// job supervisor compute the same plan, so the GCS records only each shard's owner and progress
// (data/shards/shard_ledger.h), never the index lists.
//
// Policies (--shard-policy):
//   contiguous   the epoch's seeded shuffle (epoch_permutation, the order `troupe train` visits),
//                cut into S consecutive slices. S = 1 is exactly the local trainer's order.
//   stratified   every shard gets a representative class mix: each class's examples, shuffled,
//                are dealt round-robin over the shards, so shard s holds floor or ceil(n_c / S) of
//                class c (within 1 of proportional) and the shard sizes differ by at most 1; each
//                shard's order is then shuffled so its batches mix the classes too.
//   interleaved  the epoch's shuffle dealt round-robin in blocks of `block` examples: shard s gets
//                blocks s, s + S, s + 2S, ... With S = replicas and block = per-replica batch, the
//                t-th batches of the S shards together are the t-th global batch of `troupe train`
//                (which worker holds which shard does not matter to a sum of gradients).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::data {

enum class ShardPolicy { contiguous, stratified, interleaved };
const char* shard_policy_name(ShardPolicy p);  // "contiguous", "stratified", "interleaved"
// invalid_argument naming the text and listing the policies when it is none of them.
Expected<ShardPolicy> parse_shard_policy(const std::string& text);

struct ShardPlanOptions {
  int shards = 1;                 // S, shards per epoch: 1 .. examples
  ShardPolicy policy = ShardPolicy::contiguous;
  uint64_t seed = 0;              // the job's seed; each epoch's shuffle derives from (seed, epoch)
  int64_t block = 1;              // interleaved only: examples per block, >= 1
};

struct ShardPlan {
  int epoch = 0;
  // shards[s] = the example indices of shard s, in the order they are visited.
  std::vector<std::vector<int32_t>> shards;

  int64_t examples() const;                 // sum of the shard sizes
  std::vector<int64_t> shard_sizes() const; // what ShardLedger::create_epoch records
};

// The plan of epoch `epoch` (1-based, like the trainer's) over `examples` examples. `labels` (one
// per example, in [0, classes)) is needed by `stratified` only and may be empty otherwise.
// Errors (invalid_argument, naming the value): examples < 1 or above int32, shards outside
// [1, examples], block < 1, stratified without one label per example or with a label outside
// [0, classes).
Expected<ShardPlan> plan_epoch(int64_t examples, const std::vector<int32_t>& labels, int classes,
                               const ShardPlanOptions& options, int epoch);

}  // namespace troupe::data
