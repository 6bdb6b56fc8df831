// The step loop shared by the ring reduce-scatter and the ring all-gather (collectives/algorithm.h).
#include <algorithm>

#include "collectives/algorithm.h"

namespace troupe::collectives {

Status ring_pass(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, int shift,
                 const Wire& wire, const RingReceive& receive) {
  const int p = ctx.size(), r = ctx.rank();
  const int next = ring_mod(r + 1, p), prev = ring_mod(r - 1, p);
  std::vector<char> send_buf, recv_buf;
  for (int s = 0; s + 1 < p; ++s) {
    const int sb = ring_mod(r - s - shift, p), rb = ring_mod(r - s - shift - 1, p);
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
      receive(data + offsets[rb] + at, recv_buf.data(), rn);
    }
  }
  return {};
}

}  // namespace troupe::collectives
