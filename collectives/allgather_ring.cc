// Ring all-gather. Rank r starts with block r. In step s (0 .. size-2) it sends block (r-s) to
// rank r+1 and receives block (r-s-1) from rank r-1: after size-1 steps every rank holds every
// block. Two forms: raw bytes (the allgather collective) and f32 values travelling as a Wire dtype
// (the second half of the ring all-reduce).
#include "collectives/algorithm.h"

namespace troupe::collectives {

Status allgather_ring(const CallContext& ctx, char* out, size_t block_bytes) {
  const int p = ctx.size(), r = ctx.rank();
  const int next = ring_mod(r + 1, p), prev = ring_mod(r - 1, p);
  for (int s = 0; s + 1 < p; ++s) {
    const int sb = ring_mod(r - s, p), rb = ring_mod(r - s - 1, p);
    // Distinct blocks of `out`: send straight from and receive straight into the result.
    TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send_recv(next, out + sb * block_bytes, block_bytes, prev,
                                                            out + rb * block_bytes, block_bytes, ctx.deadline)));
  }
  return {};
}

Status ring_allgather_f32(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, const Wire& wire) {
  // Our own block travels as `wire`: round it the same way so every rank ends with identical values.
  const int r = ctx.rank();
  wire.round(data + offsets[r], offsets[r + 1] - offsets[r]);
  return ring_pass(ctx, data, offsets, /*shift=*/0, wire, /*receive=*/nullptr);  // store in place
}

}  // namespace troupe::collectives
