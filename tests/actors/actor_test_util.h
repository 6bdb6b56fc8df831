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
  b[0] = static_cast<uint8_t>(n >> 24);  // the number leads, so short_hex() tells ids apart
  b[1] = static_cast<uint8_t>(n >> 16);
  b[2] = static_cast<uint8_t>(n >> 8);
  b[3] = static_cast<uint8_t>(n);
  b[15] = 0xab;  // never nil
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
