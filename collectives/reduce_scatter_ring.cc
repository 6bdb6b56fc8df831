// Ring reduce-scatter. The buffer is cut into size() blocks. In step s (0 .. size-2) rank r sends
// its partial block (r-s-1) to rank r+1 and receives block (r-s-2) from rank r-1, accumulating it
// into its own copy. After size-1 steps block r on rank r has passed through every rank: it holds
// the full reduction. Each rank sends (size-1)/size of the buffer: bandwidth-optimal.
#include "collectives/algorithm.h"

namespace troupe::collectives {

Status ring_reduce_scatter(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, ReduceOp op,
                           const Wire& wire) {
  thread_local std::vector<float> scratch;  // max over f16/bf16 only: one segment, kept between calls
  return ring_pass(ctx, data, offsets, /*shift=*/1, wire, [&](float* dst, const char* src, size_t n) {
    wire.accumulate(op, dst, src, n, &scratch);
  });
}

Status reduce_scatter_ring(const CallContext& ctx, float* data, size_t count, ReduceOp op, const Wire& wire) {
  std::vector<size_t> offsets(ctx.size() + 1);
  for (int b = 0; b <= ctx.size(); ++b) offsets[b] = count * b;
  return ring_reduce_scatter(ctx, data, offsets, op, wire);
}

}  // namespace troupe::collectives
