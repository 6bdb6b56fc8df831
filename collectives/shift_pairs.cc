// The shift (Communicator::shift): every rank sends its buffer to rank + distance and receives
// rank - distance's, both at once over the transport's send_recv, in segments of at most
// kSegmentElements floats' bytes so a large buffer never needs staging. One exchange per segment;
// the peers' segments line up because every rank moves the same number of bytes.
#include <algorithm>

#include "collectives/algorithm.h"

namespace troupe::collectives {

Status shift_pairs(const CallContext& ctx, const char* in, char* out, size_t bytes, int distance) {
  const int p = ctx.size(), r = ctx.rank();
  const int to = ring_mod(r + distance, p), from = ring_mod(r - distance, p);
  const size_t segment = kSegmentElements * sizeof(float);
  for (size_t at = 0; at < bytes; at += segment) {
    const size_t n = std::min(segment, bytes - at);
    TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send_recv(to, in + at, n, from, out + at, n, ctx.deadline)));
  }
  return {};
}

}  // namespace troupe::collectives
