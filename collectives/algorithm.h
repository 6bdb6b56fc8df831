// Internal to collectives/: how the Communicator picks an algorithm and what every algorithm file
// (allreduce_ring.cc, allreduce_halving_doubling.cc, broadcast_tree.cc, allgather_ring.cc,
// reduce_scatter_ring.cc, barrier.cc) implements. Not part of the public API.
//
// Reductions run on an f32 working buffer (f16/bf16 buffers are widened first); the Wire says how
// values travel: f32, or f16/bf16 to halve the bytes. Every received partial sum is widened and
// accumulated in f32.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace troupe::collectives {

// Picks the algorithm of `op` ("allreduce", "broadcast", "allgather", "reduce_scatter", "barrier")
// for a buffer of `bytes` over `size` ranks. `requested` "auto" chooses: allreduce of <= 64 KiB
// (latency-bound) -> halving_doubling, larger (bandwidth-bound) -> ring; broadcast -> tree;
// allgather and reduce_scatter -> ring; barrier -> dissemination. When the transport runs
// collectives natively (`native` is its name, e.g. "shm"), auto chooses that for every op and the
// point-to-point algorithms stay selectable by name. Any other name must be one the op has, else
// invalid_argument listing them.
Expected<std::string> choose_algorithm(const std::string& op, const std::string& requested, size_t bytes,
                                       const std::string& native = "");

inline constexpr size_t kSmallAllreduceBytes = 64 * 1024;

// One collective call in progress: its transport, deadline, and the prefix of its errors.
struct CallContext {
  Transport& transport;
  Clock::time_point deadline;
  std::string prefix;  // "allreduce #17 (ring)"

  int rank() const { return transport.rank(); }
  int size() const { return transport.size(); }
  // `s` (a transport error naming a rank) with this call's op, sequence number and algorithm.
  Status wrap(const Status& s) const { return s.ok() ? s : Status(s.code(), prefix + ": " + s.message()); }
};

// How f32 values travel between ranks.
struct Wire {
  DType dtype = DType::f32;

  size_t bytes(size_t n) const { return n * dtype_size(dtype); }
  void encode(const float* src, size_t n, void* dst) const;
  void decode(const void* src, size_t n, float* dst) const;
  // dst = dst op decode(src); avg accumulates as sum. `scratch` is reused between calls.
  void accumulate(ReduceOp op, float* dst, const void* src, size_t n, std::vector<float>* scratch) const;
  // x = decode(encode(x)): what the other ranks will hold once x has travelled, so all agree bitwise.
  void round(float* x, size_t n) const;
};

// Most elements moved by one send_recv: bounds the scratch memory of the ring algorithms. 512 KiB
// of f32: a received segment is still in cache when it is reduced (1 MiB segments were 1.3-2x
// slower over TCP at 64 MiB with 2 ranks on the dev box, 256 KiB and less no faster).
inline constexpr size_t kSegmentElements = size_t{1} << 17;

// Block b of a ring is elements [offsets[b], offsets[b+1]); offsets has size()+1 entries.
std::vector<size_t> even_blocks(size_t count, int blocks);

// a mod n in [0, n), for ring neighbours and block indices.
inline int ring_mod(int a, int n) { return ((a % n) + n) % n; }

// What a ring pass does with each received segment: n values (wire bytes at `src`) for `dst`.
using RingReceive = std::function<void(float* dst, const char* src, size_t n)>;
// size()-1 steps over blocks of `data`: in step s rank r sends block (r - s - shift) to rank r+1 and
// receives block (r - s - shift - 1) from rank r-1, both in segments of at most kSegmentElements,
// handing each received segment to `receive`, or, when `receive` is empty, storing its values in
// place (an f32 wire then receives straight into `data`). Allocates nothing per call (per-thread
// staging of two segments at most). The common core of the ring algorithms.
Status ring_pass(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, int shift,
                 const Wire& wire, const RingReceive& receive);

// Ring reduce-scatter over blocks of `data`: afterwards rank r's block r holds the reduction.
Status ring_reduce_scatter(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, ReduceOp op,
                           const Wire& wire);
// Ring all-gather over blocks of `data`: rank r contributes block r; values travel as `wire`.
Status ring_allgather_f32(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, const Wire& wire);

Status allreduce_ring(const CallContext& ctx, float* data, size_t count, ReduceOp op, const Wire& wire);
Status allreduce_halving_doubling(const CallContext& ctx, float* data, size_t count, ReduceOp op, const Wire& wire);
// `data` holds count * size elements; afterwards block rank() holds the reduction.
Status reduce_scatter_ring(const CallContext& ctx, float* data, size_t count, ReduceOp op, const Wire& wire);
// `out` holds size blocks of `block_bytes`; block rank() is this rank's contribution.
Status allgather_ring(const CallContext& ctx, char* out, size_t block_bytes);
Status broadcast_tree(const CallContext& ctx, char* buf, size_t bytes, int root);
Status barrier_dissemination(const CallContext& ctx);
// `in` (bytes) to rank + distance, `out` (bytes) from rank - distance, in segments (shift_pairs.cc).
Status shift_pairs(const CallContext& ctx, const char* in, char* out, size_t bytes, int distance);

}  // namespace troupe::collectives
