// Ring all-reduce: a ring reduce-scatter (rank r ends owning the reduced block r) followed by a ring
// all-gather of the reduced blocks. Each rank sends and receives 2(size-1)/size of the buffer, the
// bandwidth optimum, in 2(size-1) latency-bound steps: the choice for large buffers. Counts below
// size() leave some blocks empty; their steps move no bytes.
#include "collectives/algorithm.h"

namespace troupe::collectives {

Status allreduce_ring(const CallContext& ctx, float* data, size_t count, ReduceOp op, const Wire& wire) {
  const std::vector<size_t> offsets = even_blocks(count, ctx.size());
  TROUPE_RETURN_IF_ERROR(ring_reduce_scatter(ctx, data, offsets, op, wire));
  return ring_allgather_f32(ctx, data, offsets, wire);
}

}  // namespace troupe::collectives
