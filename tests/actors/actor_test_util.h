// Test helpers for tests/actors: ids that sort in the order they are made (so tie-breaking by id is
// predictable) and resources in one call.
#pragma once

#include <array>
#include <cstdint>

#include "core/ids.h"
#include "gcs/records.h"

namespace troupe::testing {

template <class IdT>
IdT numbered_id(uint32_t n) {
  std::array<uint8_t, 16> b{};
  b[0] = 0xab;  // never nil
  b[12] = static_cast<uint8_t>(n >> 24);
  b[13] = static_cast<uint8_t>(n >> 16);
  b[14] = static_cast<uint8_t>(n >> 8);
  b[15] = static_cast<uint8_t>(n);
  return IdT::from_bytes(b);
}
inline NodeId node_id(uint32_t n) { return numbered_id<NodeId>(n); }
inline ActorId actor_id(uint32_t n) { return numbered_id<ActorId>(n); }

constexpr int64_t kGiB = int64_t{1} << 30;

inline gcs::Resources res(double cpus, double gpus = 0, int64_t memory = 0) {
  gcs::Resources r;
  r.cpus = cpus;
  r.gpus = gpus;
  r.memory_bytes = memory;
  return r;
}

}  // namespace troupe::testing
