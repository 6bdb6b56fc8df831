// Recursive halving-doubling all-reduce (Rabenseifner), for small buffers where the number of
// steps, not the bytes, sets the time: 2 log2(P) steps instead of the ring's 2(P-1).
//
// 1. Fold: with P = pof2 + rem (pof2 the largest power of two <= size), each even rank r < 2 rem
//    sends its whole buffer to rank r+1 and sits out; the others form a group of pof2 "virtual" ranks.
// 2. Recursive halving (reduce-scatter): at distance mask = pof2/2, ..., 1 each virtual rank swaps
//    half of its current range with the virtual rank vr ^ mask and keeps the reduced other half.
// 3. Recursive doubling (all-gather): the same pairs in reverse order swap their reduced halves.
// 4. Unfold: each odd rank r < 2 rem sends the result back to rank r-1.
#include "collectives/algorithm.h"

#include <utility>

namespace troupe::collectives {

Status allreduce_halving_doubling(const CallContext& ctx, float* data, size_t count, ReduceOp op, const Wire& wire) {
  const int p = ctx.size(), r = ctx.rank();
  int pof2 = 1;
  while (pof2 * 2 <= p) pof2 *= 2;
  const int rem = p - pof2;
  auto real_rank = [rem](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  std::vector<char> send_buf, recv_buf;
  std::vector<float> scratch;
  auto exchange = [&](int peer, const float* give, size_t give_n, size_t take_n) {
    send_buf.resize(wire.bytes(give_n));
    recv_buf.resize(wire.bytes(take_n));
    wire.encode(give, give_n, send_buf.data());
    return ctx.wrap(ctx.transport.send_recv(peer, send_buf.data(), send_buf.size(), peer, recv_buf.data(),
                                            recv_buf.size(), ctx.deadline));
  };

  // 1. Fold the ranks beyond a power of two into their odd neighbours.
  int vr = r >= 2 * rem ? r - rem : -1;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      send_buf.resize(wire.bytes(count));
      wire.encode(data, count, send_buf.data());
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send(r + 1, send_buf.data(), send_buf.size(), ctx.deadline)));
    } else {
      recv_buf.resize(wire.bytes(count));
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.recv(r - 1, recv_buf.data(), recv_buf.size(), ctx.deadline)));
      wire.accumulate(op, data, recv_buf.data(), count, &scratch);
      vr = r / 2;
    }
  }

  if (vr >= 0) {
    // 2. Recursive halving: keep the lower half when our bit is 0, the upper when it is 1.
    size_t lo = 0, hi = count;
    std::vector<std::pair<size_t, size_t>> ranges;  // the range before each split, to undo in step 3
    for (int mask = pof2 / 2; mask >= 1; mask /= 2) {
      const int peer = real_rank(vr ^ mask);
      const size_t mid = lo + (hi - lo) / 2;
      const bool lower = (vr & mask) == 0;
      const size_t keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
      const size_t give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
      TROUPE_RETURN_IF_ERROR(exchange(peer, data + give_lo, give_hi - give_lo, keep_hi - keep_lo));
      wire.accumulate(op, data + keep_lo, recv_buf.data(), keep_hi - keep_lo, &scratch);
      ranges.emplace_back(lo, hi);
      lo = keep_lo;
      hi = keep_hi;
    }
    // [lo, hi) is fully reduced here; round it as it will travel so all ranks agree bitwise.
    wire.round(data + lo, hi - lo);
    // 3. Recursive doubling: the partner holds the other half of the range before the split.
    for (int mask = 1; mask < pof2; mask *= 2) {
      const int peer = real_rank(vr ^ mask);
      const auto [plo, phi] = ranges.back();
      ranges.pop_back();
      const size_t other_lo = lo == plo ? hi : plo, other_hi = lo == plo ? phi : lo;
      TROUPE_RETURN_IF_ERROR(exchange(peer, data + lo, hi - lo, other_hi - other_lo));
      wire.decode(recv_buf.data(), other_hi - other_lo, data + other_lo);
      lo = plo;
      hi = phi;
    }
  }

  // 4. Unfold: give the folded even ranks the result.
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      send_buf.resize(wire.bytes(count));
      wire.encode(data, count, send_buf.data());
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.send(r - 1, send_buf.data(), send_buf.size(), ctx.deadline)));
    } else {
      recv_buf.resize(wire.bytes(count));
      TROUPE_RETURN_IF_ERROR(ctx.wrap(ctx.transport.recv(r + 1, recv_buf.data(), recv_buf.size(), ctx.deadline)));
      wire.decode(recv_buf.data(), count, data);
    }
  }
  return {};
}

}  // namespace troupe::collectives
