// All-reduce over shared memory (collectives/shm_collectives.h), two ways:
//
// one shot (<= 64 KiB of f32 per rank: latency-bound): every rank widens its input into its slot,
// passes one barrier, then reduces the whole buffer itself from all slots in rank order 0..n-1, so
// every rank computes bitwise the same result with no second barrier.
//
// rounds (larger: bandwidth-bound): the buffer goes in rounds of one slot. In round k rank r owns
// block r of the round: it reduces that block over every rank's buffer in rank order and writes the
// result back into every rank's buffer, so each element is computed once and all ranks agree
// bitwise. A rank's buffer is its staging slot (input widened in, result narrowed out), or, when
// in == out lies in its arena, the arena itself: no copies at all. Round k+1 is copied in while the
// others finish round k, and one barrier ends round k and publishes round k+1.
#include <algorithm>

#include "collectives/algorithm.h"
#include "collectives/shm_collectives.h"
#include "kernels/cpu/ops.h"

namespace troupe::collectives::shm {

namespace cpu = troupe::kernels::cpu;

namespace {

constexpr size_t kOneShotBytes = 64 * 1024;

}  // namespace

Status Collectives::allreduce(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                              ReduceOp op) {
  const size_t bytes = count * dtype_size(dtype);
  if (count * sizeof(float) <= std::min(kOneShotBytes, s_.segment->slot_bytes()))
    return allreduce_one_shot(call, in, out, count, dtype, op);
  // Zero copy when the caller's buffer is in place inside this rank's arena.
  const char* arena = s_.segment->arena(s_.rank());
  const char* p = static_cast<const char*>(in);
  const bool in_arena = in == out && p >= arena && p + bytes <= arena + s_.segment->arena_bytes() &&
                        (p - arena) % dtype_size(dtype) == 0;
  return allreduce_rounds(call, in, out, count, dtype, op, in_arena ? p - arena : -1);
}

Status Collectives::allreduce_one_shot(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                                       ReduceOp op) {
  const uint64_t b = s_.barriers + 1;  // the barrier agree() passes
  load(reinterpret_cast<float*>(slot(s_.rank(), b)), View{static_cast<char*>(const_cast<void*>(in)), dtype}, 0,
       count);
  TROUPE_RETURN_IF_ERROR(agree(call));
  const View result{static_cast<char*>(out), dtype};
  for (size_t at = 0; at < count; at += kPiece) {
    const size_t n = std::min(kPiece, count - at);
    load(acc_.data(), View{slot(0, b), DType::f32}, at, n);
    for (int q = 1; q < s_.size(); ++q) combine(op, acc_.data(), View{slot(q, b), DType::f32}, at, n, tmp_.data());
    if (op == ReduceOp::avg) cpu::scale(acc_.data(), n, 1.0f / static_cast<float>(s_.size()));
    store(result, at, acc_.data(), n);
  }
  return {};
}

Status Collectives::allreduce_rounds(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                                     ReduceOp op, int64_t arena_offset) {
  const int n_ranks = s_.size(), me = s_.rank();
  const size_t esize = dtype_size(dtype), per_round = slot_floats();
  const size_t rounds = (count + per_round - 1) / per_round;
  const uint64_t b0 = s_.barriers + 1;  // round k is published at barrier b0 + k
  const View input{static_cast<char*>(const_cast<void*>(in)), dtype}, output{static_cast<char*>(out), dtype};
  auto round_size = [&](size_t k) { return std::min(per_round, count - k * per_round); };
  auto copy_in = [&](size_t k) {
    if (arena_offset < 0) load(reinterpret_cast<float*>(slot(me, b0 + k)), input, k * per_round, round_size(k));
  };
  auto copy_out = [&](size_t k) {
    if (arena_offset < 0)
      store(output, k * per_round, reinterpret_cast<const float*>(slot(me, b0 + k)), round_size(k));
  };

  copy_in(0);
  TROUPE_RETURN_IF_ERROR(agree(call, arena_offset));
  std::vector<View> views(n_ranks);
  for (size_t k = 0; k < rounds; ++k) {
    // Where every rank's part of round k lives, as it announced.
    for (int q = 0; q < n_ranks; ++q) {
      const int64_t off = published(q).arena_offset;
      views[q] = off >= 0 ? View{s_.segment->arena(q) + off + k * per_round * esize, dtype}
                          : View{slot(q, b0 + k), DType::f32};
    }
    const std::vector<size_t> blocks = even_blocks(round_size(k), n_ranks);
    for (size_t at = blocks[me]; at < blocks[me + 1]; at += kPiece) {
      const size_t n = std::min(kPiece, blocks[me + 1] - at);
      load(acc_.data(), views[0], at, n);
      for (int q = 1; q < n_ranks; ++q) combine(op, acc_.data(), views[q], at, n, tmp_.data());
      if (op == ReduceOp::avg) cpu::scale(acc_.data(), n, 1.0f / static_cast<float>(n_ranks));
      for (int q = 0; q < n_ranks; ++q) store(views[q], at, acc_.data(), n);
    }
    if (k + 1 < rounds) copy_in(k + 1);  // its slot's last readers finished before barrier b0 + k
    TROUPE_RETURN_IF_ERROR(sync(call));  // round k reduced everywhere, round k + 1 published
    copy_out(k);
  }
  return {};
}

}  // namespace troupe::collectives::shm
