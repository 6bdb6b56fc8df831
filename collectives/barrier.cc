// Dissemination barrier: in round k (distance 1, 2, 4, ... < size) rank r signals rank r+k and
// waits for rank r-k. After ceil(log2(size)) rounds every rank has heard, directly or through
// others, from every rank: none leaves before all have arrived.
#include "collectives/algorithm.h"

namespace troupe::collectives {

Status barrier_dissemination(const CallContext& ctx) {
  const int p = ctx.size(), r = ctx.rank();
  for (int k = 1; k < p; k *= 2) {
    char out = 1, in = 0;
    TROUPE_RETURN_IF_ERROR(
        ctx.wrap(ctx.transport.send_recv((r + k) % p, &out, 1, (r - k + p) % p, &in, 1, ctx.deadline)));
  }
  return {};
}

}  // namespace troupe::collectives
