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

// An int64 as raw bits in two floats, and back.
inline void put_bits(float* at, int64_t v) { std::memcpy(at, &v, sizeof v); }
inline int64_t get_bits(const float* at) {
  int64_t v = 0;
  std::memcpy(&v, at, sizeof v);
  return v;
}
inline void put(float* record, Field field, int64_t v) { put_bits(record + 2 * field, v); }
inline int64_t get(const float* record, Field field) { return get_bits(record + 2 * field); }

inline collectives::CollectiveOptions collective_options(std::chrono::milliseconds timeout) {
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  return co;
}

// The floats of a record of `owned` parameters with `vectors` optimizer vectors each.
inline size_t floats_for(size_t owned, size_t vectors) { return kHeaderFloats + (1 + vectors) * owned; }
// Rank `rank`'s record in `zero`'s group.
inline size_t floats_of(const ShardedState& zero, int rank) {
  return floats_for(zero.owned_floats(rank), zero.optimizer_vectors());
}

// Collective: every rank's `mine` (the same count on each), all-gathered as raw bits (as a header
// travels), rank after rank.
inline Expected<std::vector<int64_t>> gather_int64s(collectives::Communicator& comm, const std::vector<int64_t>& mine,
                                                    std::chrono::milliseconds timeout) {
  std::vector<float> sent(2 * mine.size());
  for (size_t i = 0; i < mine.size(); ++i) put_bits(&sent[2 * i], mine[i]);
  std::vector<float> all(sent.size() * static_cast<size_t>(comm.size()));
  TROUPE_RETURN_IF_ERROR(comm.allgather(sent.data(), all.data(), sent.size(), DType::f32, collective_options(timeout)));
  std::vector<int64_t> out(all.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = get_bits(&all[2 * i]);
  return out;
}

// Collective: `mine` summed over the ranks of `comm`.
inline Expected<int64_t> sum_over_ranks(collectives::Communicator& comm, int64_t mine,
                                        std::chrono::milliseconds timeout) {
  auto all = gather_int64s(comm, {mine}, timeout);
  if (!all.ok()) return all.status();
  int64_t sum = 0;
  for (int64_t v : *all) sum += v;
  return sum;
}

}  // namespace troupe::mirror_record
