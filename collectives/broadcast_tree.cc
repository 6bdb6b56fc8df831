// Binomial-tree broadcast. Ranks are renumbered so the root is virtual rank 0. A virtual rank v
// receives from v minus its lowest set bit, then sends to v + mask for every lower power of two
// mask: the set of ranks holding the data doubles each round, log2(size) rounds in all.
#include "collectives/algorithm.h"

namespace troupe::collectives {

Status broadcast_tree(const CallContext& ctx, char* buf, size_t bytes, int root) {
  const int p = ctx.size();
  const int vr = (ctx.rank() - root + p) % p;
  auto real_rank = [p, root](int v) { return (v + root) % p; };
  int mask = 1;
  while (mask < p) {
    if (vr & mask) {  // our parent: clear the lowest set bit
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.recv(real_rank(vr - mask), buf, bytes, ctx.deadline)));
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < p)
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send(real_rank(vr + mask), buf, bytes, ctx.deadline)));
  }
  return {};
}

}  // namespace troupe::collectives
