// Internal to the shared-memory transport: the native collectives ("shm") and the state they share
// with the transport's send/recv. One algorithm per file: allreduce_shm.cc, broadcast_shm.cc,
// allgather_shm.cc, reduce_scatter_shm.cc, barrier_shm.cc (which also holds the barrier and the
// agreement check every call starts with).
//
// Data moves in rounds through per-rank staging slots: a rank writes its part of round k into
// slot (b % 2), where b is the barrier that publishes it; peers read it (and all-reduce writes its
// results back into it) before the next barrier. A slot is rewritten only after the barrier that
// follows its last reader, so one barrier per round suffices and consecutive calls keep
// alternating. Every rank passes the same barriers in the same order (b counts them).
#pragma once

#include <vector>

#include "collectives/native.h"
#include "collectives/shm_wait.h"

namespace troupe::collectives::shm {

// One rank's state, shared by its transport (send/recv) and its native collectives.
struct RankState {
  explicit RankState(std::unique_ptr<Segment> s) : segment(std::move(s)), waiter(*segment) {}
  std::unique_ptr<Segment> segment;
  Waiter waiter;
  Status failed;            // first error: a failed transport stays failed
  uint64_t barriers = 0;    // barriers passed, the same on every rank
  uint64_t native_calls = 0;

  int rank() const { return segment->rank(); }
  int size() const { return segment->size(); }
  Status fail(Status s) {
    if (failed.ok()) failed = s;
    return s;
  }
};

// A rank's buffer for one round as the reducer sees it: f32 staging, or an arena in the call's dtype.
struct View {
  char* base;
  DType dtype;
};
// acc[0..n) = view[at..at+n) widened to f32.
void load(float* acc, const View& v, size_t at, size_t n);
// acc = acc op view[at..at+n); `tmp` holds n floats (widened f16/bf16 for max).
void combine(ReduceOp op, float* acc, const View& v, size_t at, size_t n, float* tmp);
// view[at..at+n) = acc, narrowed to the view's dtype.
void store(const View& v, size_t at, const float* acc, size_t n);
// Elements per piece reduced through the (cache-resident) scratch.
inline constexpr size_t kPiece = 4096;

class Collectives final : public NativeCollectives {
 public:
  explicit Collectives(RankState& state) : s_(state) {}
  std::string name() const override { return "shm"; }

  Status allreduce(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                   ReduceOp op) override;
  Status broadcast(const NativeCall& call, void* buf, size_t count, DType dtype, int root) override;
  Status allgather(const NativeCall& call, const void* in, void* out, size_t count, DType dtype) override;
  Status reduce_scatter(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                        ReduceOp op) override;
  Status barrier(const NativeCall& call) override;
  // The start of this rank's arena when it holds `bytes`, else nullptr.
  void* shared_buffer(size_t bytes) override;

 private:
  // The call's first barrier: publishes its descriptor, waits for every rank, and returns
  // invalid_argument on every rank when any rank called something else. Also returns at once the
  // error of a transport that already failed or a group that was aborted.
  Status agree(const NativeCall& call, int64_t arena_offset = -1);
  // Arrives at the next barrier and waits for every rank (or the first error).
  Status sync(const NativeCall& call);
  // The staging slot of `rank` published at barrier `b`.
  char* slot(int rank, uint64_t b) { return s_.segment->staging(rank, static_cast<int>(b & 1)); }
  size_t slot_floats() const { return s_.segment->slot_bytes() / sizeof(float); }
  const PublishedCall& published(int rank);

  Status allreduce_one_shot(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                            ReduceOp op);
  Status allreduce_rounds(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                          ReduceOp op, int64_t arena_offset);

  RankState& s_;
  std::vector<float> acc_ = std::vector<float>(kPiece), tmp_ = std::vector<float>(kPiece);
};

}  // namespace troupe::collectives::shm
