// Collective operations over a group of ranks: all-reduce (sum, avg, max), broadcast, all-gather,
// reduce-scatter and barrier, on f32, f16 and bf16 buffers, in place or not. One Communicator per
// rank, over that rank's Transport. Each call takes CollectiveOptions with a deadline; a member
// that dies or stops answering makes every other member's call return by its deadline with an error
// naming the missing rank and the collective's sequence number ("allreduce #17 (ring): rank 3 ...").
//
// All ranks must issue the same collectives in the same order with the same counts and dtypes (as
// with MPI/NCCL); the sequence number counts them.
#pragma once

#include <chrono>
#include <cstdint>
#include <atomic>
#include <memory>
#include <string>

#include "collectives/transport.h"
#include "core/dtype.h"
#include "core/status.h"

namespace troupe::collectives {

enum class ReduceOp : uint8_t { sum, avg, max };
const char* reduce_op_name(ReduceOp op);

struct CollectiveOptions {
  std::chrono::milliseconds timeout{30000};
  uint64_t tag = 0;                  // caller's label, carried into error messages
  // auto, or a name the op has: ring, halving_doubling, tree, dissemination, or the transport's
  // native path ("shm"), which auto prefers (see choose_algorithm)
  std::string algorithm = "auto";
  // Wire format of reductions: f32 buffers may travel as f16 or bf16 (accumulation stays f32).
  // Equal to the buffer's dtype (or f32 for f32 buffers) means no compression.
  DType wire = DType::f32;
  // Device collectives (DeviceCommunicator) only: the cudaStream_t whose queued work must finish
  // before the call reads its buffers; null means the legacy default stream. Host calls ignore it.
  void* stream = nullptr;
};

class Communicator {
 public:
  explicit Communicator(std::unique_ptr<Transport> transport);
  ~Communicator();

  int rank() const;
  int size() const;
  uint64_t sequence() const { return sequence_; }  // collectives issued by this rank so far
  // Bytes this rank's collectives carried so far (any thread may read it): a reduction's elements
  // at its wire type's size (a bf16 wire: 2 bytes each), a broadcast's or all-gather's buffer; nothing
  // in a group of one. The step timeline's per-step communication bytes (trainers/report/step_timeline.h).
  uint64_t payload_bytes() const { return payload_bytes_.load(std::memory_order_relaxed); }

  // out[i] = op over ranks of in[i], for i < count; `in` may equal `out` (in place).
  Status allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                   const CollectiveOptions& options = {});
  // Every rank's `buf` becomes root's `buf`.
  Status broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& options = {});
  // out = concat over ranks r of in_r (count elements each): out holds count * size() elements.
  Status allgather(const void* in, void* out, size_t count, DType dtype, const CollectiveOptions& options = {});
  // `in` holds count * size() elements; out = op over ranks of block rank() of in (count elements).
  Status reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                        const CollectiveOptions& options = {});
  Status barrier(const CollectiveOptions& options = {});
  // Point to point around the ring: `in` (count elements) goes to rank (rank() + distance) mod size(),
  // `out` (count elements, not overlapping `in`) receives rank (rank() - distance) mod size()'s.
  // Every rank passes the same count (pad to the largest), dtype and distance. What a buddy mirror
  // (trainers/sharded/buddy_mirror.h) moves; a group of one, or distance 0 mod size(), copies.
  Status shift(const void* in, void* out, size_t count, DType dtype, int distance,
               const CollectiveOptions& options = {});

  // A buffer of `bytes` the transport's native collectives read in place (the shm transport's
  // per-rank arena, ShmGroupOptions::shared_buffer_bytes): an allreduce with in == out inside it
  // skips the copy in and out, peers reduce straight from it and write the results into it (above
  // 64 KiB; smaller ones take one staging copy, cheaper than the second barrier they would need).
  // Every call returns the same start; nullptr when the transport has no such memory or less than
  // `bytes`. Valid while the Communicator lives.
  void* shared_buffer(size_t bytes);

  Transport& transport() { return *transport_; }

 private:
  struct Call;
  Expected<Call> begin(CallDescriptor descriptor, size_t bytes, const CollectiveOptions& options);
  Status finish(Status st);

  void count_payload(size_t bytes) {
    if (size() > 1) payload_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }

  std::unique_ptr<Transport> transport_;
  uint64_t sequence_ = 0;
  std::atomic<uint64_t> payload_bytes_{0};
};

}  // namespace troupe::collectives
