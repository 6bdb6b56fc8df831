// Broadcast over shared memory (collectives/shm_collectives.h): the root copies its buffer into its
// staging slot one slot-sized round at a time; after the barrier that publishes round k every other
// rank copies it out while the root fills round k+1 into its other slot. Bytes are copied as they
// are, in the caller's dtype.
#include <algorithm>
#include <cstring>

#include "collectives/shm_collectives.h"

namespace troupe::collectives::shm {

Status Collectives::broadcast(const NativeCall& call, void* buf, size_t count, DType dtype, int root) {
  const size_t bytes = count * dtype_size(dtype), chunk = s_.segment->slot_bytes();
  const size_t rounds = (bytes + chunk - 1) / chunk;
  const uint64_t b0 = s_.barriers + 1;  // round k is published at barrier b0 + k
  const bool is_root = s_.rank() == root;
  char* data = static_cast<char*>(buf);
  auto round_bytes = [&](size_t k) { return std::min(chunk, bytes - k * chunk); };

  if (is_root && rounds > 0) std::memcpy(slot(root, b0), data, round_bytes(0));
  TROUPE_RETURN_IF_ERROR(agree(call));
  for (size_t k = 0; k < rounds; ++k) {
    if (k > 0) {
      // The root's slot for round k last held round k-2, which every rank read before barrier b0+k-1.
      if (is_root) std::memcpy(slot(root, b0 + k), data + k * chunk, round_bytes(k));
      TROUPE_RETURN_IF_ERROR(sync(call));
    }
    if (!is_root) std::memcpy(data + k * chunk, slot(root, b0 + k), round_bytes(k));
  }
  return {};
}

}  // namespace troupe::collectives::shm
