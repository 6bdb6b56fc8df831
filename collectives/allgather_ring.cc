// Ring all-gather. Rank r starts with block r. In step s (0 .. size-2) it sends block (r-s) to
// rank r+1 and receives block (r-s-1) from rank r-1: after size-1 steps every rank holds every
// block. Two forms: raw bytes (the allgather collective) and f32 values travelling as a Wire dtype
// (the second half of the ring all-reduce).
#include "collectives/algorithm.h"

#include <algorithm>

namespace troupe::collectives {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

Status allgather_ring(const CallContext& ctx, char* out, size_t block_bytes) {
  const int p = ctx.size(), r = ctx.rank();
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  for (int s = 0; s + 1 < p; ++s) {
    const int sb = mod(r - s, p), rb = mod(r - s - 1, p);
    // Distinct blocks of `out`: send straight from and receive straight into the result.
    TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send_recv(next, out + sb * block_bytes, block_bytes, prev,
                                                            out + rb * block_bytes, block_bytes, ctx.deadline)));
  }
  return {};
}

Status ring_allgather_f32(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, const Wire& wire) {
  const int p = ctx.size(), r = ctx.rank();
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  // Our own block travels as `wire`: round it the same way so every rank ends with identical values.
  wire.round(data + offsets[r], offsets[r + 1] - offsets[r]);
  std::vector<char> send_buf, recv_buf;
  for (int s = 0; s + 1 < p; ++s) {
    const int sb = mod(r - s, p), rb = mod(r - s - 1, p);
    const size_t send_len = offsets[sb + 1] - offsets[sb], recv_len = offsets[rb + 1] - offsets[rb];
    for (size_t at = 0; at < std::max(send_len, recv_len); at += kSegmentElements) {
      const size_t sn = at < send_len ? std::min(kSegmentElements, send_len - at) : 0;
      const size_t rn = at < recv_len ? std::min(kSegmentElements, recv_len - at) : 0;
      send_buf.resize(wire.bytes(sn));
      recv_buf.resize(wire.bytes(rn));
      wire.encode(data + offsets[sb] + at, sn, send_buf.data());
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send_recv(next, send_buf.data(), send_buf.size(), prev,
                                                              recv_buf.data(), recv_buf.size(), ctx.deadline)));
      wire.decode(recv_buf.data(), rn, data + offsets[rb] + at);
    }
  }
  return {};
}

}  // namespace troupe::collectives
