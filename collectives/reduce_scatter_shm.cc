// Reduce-scatter over shared memory (collectives/shm_collectives.h): a slot holds one piece of
// every block. In round k each rank widens the k-th piece of each of its blocks into its slot; after
// the barrier that publishes them, rank r reduces piece r over every rank's slot in rank order and
// narrows the result into its `out`, while filling round k+1 into its other slot. Every element is
// computed by one rank only. `out` may be `in` or block rank() of `in`: each piece of `out` is
// written only after the same piece of `in` was copied in.
#include <algorithm>

#include "collectives/shm_collectives.h"
#include "kernels/cpu/ops.h"

namespace troupe::collectives::shm {

namespace cpu = troupe::kernels::cpu;

Status Collectives::reduce_scatter(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                                   ReduceOp op) {
  const int n_ranks = s_.size(), me = s_.rank();
  const size_t per_block = std::max<size_t>(1, slot_floats() / n_ranks);  // elements of each block per round
  const size_t rounds = (count + per_block - 1) / per_block;
  const uint64_t b0 = s_.barriers + 1;  // round k is published at barrier b0 + k
  const View input{static_cast<char*>(const_cast<void*>(in)), dtype}, output{static_cast<char*>(out), dtype};
  auto round_size = [&](size_t k) { return std::min(per_block, count - k * per_block); };
  auto copy_in = [&](size_t k) {
    float* dst = reinterpret_cast<float*>(slot(me, b0 + k));
    for (int q = 0; q < n_ranks; ++q) load(dst + q * per_block, input, q * count + k * per_block, round_size(k));
  };

  if (rounds > 0) copy_in(0);
  TROUPE_RETURN_IF_ERROR(agree(call));
  for (size_t k = 0; k < rounds; ++k) {
    if (k > 0) {
      copy_in(k);  // this slot last held round k-2, read by every rank before barrier b0+k-1
      TROUPE_RETURN_IF_ERROR(sync(call));
    }
    const size_t piece_at = me * per_block;
    for (size_t at = 0; at < round_size(k); at += kPiece) {
      const size_t n = std::min(kPiece, round_size(k) - at);
      load(acc_.data(), View{slot(0, b0 + k), DType::f32}, piece_at + at, n);
      for (int q = 1; q < n_ranks; ++q)
        combine(op, acc_.data(), View{slot(q, b0 + k), DType::f32}, piece_at + at, n, tmp_.data());
      if (op == ReduceOp::avg) cpu::scale(acc_.data(), n, 1.0f / static_cast<float>(n_ranks));
      store(output, k * per_block + at, acc_.data(), n);
    }
  }
  return {};
}

}  // namespace troupe::collectives::shm
