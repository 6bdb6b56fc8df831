// Ring reduce-scatter. The buffer is cut into size() blocks. In step s (0 .. size-2) rank r sends
// its partial block (r-s-1) to rank r+1 and receives block (r-s-2) from rank r-1, accumulating it
// into its own copy. After size-1 steps block r on rank r has passed through every rank: it holds
// the full reduction. Each rank sends (size-1)/size of the buffer: bandwidth-optimal.
#include "collectives/algorithm.h"

#include <algorithm>

namespace troupe::collectives {

namespace {
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

Status ring_reduce_scatter(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, ReduceOp op,
                           const Wire& wire) {
  const int p = ctx.size(), r = ctx.rank();
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  std::vector<char> send_buf, recv_buf;
  std::vector<float> scratch;
  for (int s = 0; s + 1 < p; ++s) {
    const int sb = mod(r - s - 1, p), rb = mod(r - s - 2, p);
    const size_t send_len = offsets[sb + 1] - offsets[sb], recv_len = offsets[rb + 1] - offsets[rb];
    // Move the blocks in segments so scratch memory stays bounded for large buffers.
    for (size_t at = 0; at < std::max(send_len, recv_len); at += kSegmentElements) {
      const size_t sn = at < send_len ? std::min(kSegmentElements, send_len - at) : 0;
      const size_t rn = at < recv_len ? std::min(kSegmentElements, recv_len - at) : 0;
      send_buf.resize(wire.bytes(sn));
      recv_buf.resize(wire.bytes(rn));
      wire.encode(data + offsets[sb] + at, sn, send_buf.data());
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send_recv(next, send_buf.data(), send_buf.size(), prev,
                                                              recv_buf.data(), recv_buf.size(), ctx.deadline)));
      wire.accumulate(op, data + offsets[rb] + at, recv_buf.data(), rn, &scratch);
    }
  }
  return {};
}

Status reduce_scatter_ring(const CallContext& ctx, float* data, size_t count, ReduceOp op, const Wire& wire) {
  std::vector<size_t> offsets(ctx.size() + 1);
  for (int b = 0; b <= ctx.size(); ++b) offsets[b] = count * b;
  return ring_reduce_scatter(ctx, data, offsets, op, wire);
}

}  // namespace troupe::collectives
