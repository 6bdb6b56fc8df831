// A buddy mirror's record (trainers/sharded/buddy_mirror.h): what one rank's round holds of its
// chunks. Four int64 (step, epoch, steps into it, the optimizer's step count) as raw bits in the
// first 8 floats — a shift or a broadcast moves bytes, nothing adds them —, then the owned
// parameters in flat order, then each optimizer vector over the same floats; zeros after, up to
// the largest rank's record (rank 0's) so every rank's record has one length.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/communicator.h"
#include "trainers/sharded/sharded_state.h"

namespace troupe::mirror_record {

constexpr size_t kHeaderFloats = 8;
enum Field : size_t { kStep = 0, kEpoch, kEpochStep, kOptimizerSteps };

inline void put(float* record, Field field, int64_t v) { std::memcpy(record + 2 * field, &v, sizeof v); }
inline int64_t get(const float* record, Field field) {
  int64_t v = 0;
  std::memcpy(&v, record + 2 * field, sizeof v);
  return v;
}

// The floats of a record of `owned` parameters with `vectors` optimizer vectors each.
inline size_t floats_for(size_t owned, size_t vectors) { return kHeaderFloats + (1 + vectors) * owned; }
// Rank `rank`'s record in `zero`'s group.
inline size_t floats_of(const ShardedState& zero, int rank) {
  return floats_for(zero.owned_floats(rank), zero.optimizer_vectors());
}

// Collective: `mine` summed over the ranks of `comm`, gathered as raw bits (as a header travels).
inline Expected<int64_t> sum_over_ranks(collectives::Communicator& comm, int64_t mine,
                                        std::chrono::milliseconds timeout) {
  float sent[2];
  std::memcpy(sent, &mine, sizeof mine);
  std::vector<float> all(2 * static_cast<size_t>(comm.size()));
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  TROUPE_RETURN_IF_ERROR(comm.allgather(sent, all.data(), 2, DType::f32, co));
  int64_t sum = 0;
  for (size_t r = 0; r < all.size(); r += 2) {
    int64_t v = 0;
    std::memcpy(&v, &all[r], sizeof v);
    sum += v;
  }
  return sum;
}

}  // namespace troupe::mirror_record
