// The order and the steps of an epoch: the seeded shuffle every training path draws its batches from
// (`troupe train`, a sync replica's slice, a job's shard plan), and how many steps an epoch of a
// given batch has with its last partial batch dropped or padded (--last-batch).
#pragma once

#include <cstdint>
#include <vector>

namespace troupe {

// A permutation of [0, n) for epoch `epoch` of a job seeded `seed` (mt19937_64 of seed + epoch):
// the same on every replica and host.
std::vector<int32_t> epoch_permutation(int64_t n, uint64_t seed, int epoch);

// Steps in an epoch of `examples` examples in batches of `batch`: whole batches only, or with `pad`
// one more for a remainder (--last-batch).
int64_t epoch_steps(int64_t examples, int64_t batch, bool pad);
// The examples of step `step` (0-based) of such an epoch: `batch`, or the remainder at the padded
// last step.
int64_t step_examples(int64_t examples, int64_t batch, bool pad, int64_t step);

}  // namespace troupe
