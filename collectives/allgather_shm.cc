// All-gather over shared memory (collectives/shm_collectives.h): in round k every rank copies the
// k-th slot-sized piece of its block into its staging slot; after the barrier that publishes it
// every rank copies all pieces into place while filling round k+1 into its other slot. A rank's own
// block is copied straight from `in` (nothing to do when `in` already is that block of `out`).
#include <algorithm>
#include <cstring>

#include "collectives/shm_collectives.h"

namespace troupe::collectives::shm {

Status Collectives::allgather(const NativeCall& call, const void* in, void* out, size_t count, DType dtype) {
  const int me = s_.rank();
  const size_t block = count * dtype_size(dtype), chunk = s_.segment->slot_bytes();
  const size_t rounds = (block + chunk - 1) / chunk;
  const uint64_t b0 = s_.barriers + 1;  // round k is published at barrier b0 + k
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  auto round_bytes = [&](size_t k) { return std::min(chunk, block - k * chunk); };
  auto copy_in = [&](size_t k) { std::memcpy(slot(me, b0 + k), src + k * chunk, round_bytes(k)); };

  if (rounds > 0) copy_in(0);
  TROUPE_RETURN_IF_ERROR(agree(call));
  for (size_t k = 0; k < rounds; ++k) {
    if (k > 0) {
      copy_in(k);  // this slot last held round k-2, read by every rank before barrier b0+k-1
      TROUPE_RETURN_IF_ERROR(sync(call));
    }
    for (int q = 0; q < s_.size(); ++q)
      if (q != me) std::memcpy(dst + q * block + k * chunk, slot(q, b0 + k), round_bytes(k));
  }
  if (block > 0 && dst + me * block != src) std::memmove(dst + me * block, src, block);
  return {};
}

}  // namespace troupe::collectives::shm
