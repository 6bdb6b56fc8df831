// Gradient buckets: the `sync` strategy's all-reduce of gradients, started while backward is still
// running (as PyTorch DDP does). The parameter blocks are grouped into buckets in reverse
// declaration order, the order backward finishes them; a trainer announces each block as it becomes
// final (Gradients::ready, trainers/api/trainer.h), and one communication thread per replica
// all-reduces (averages) a bucket as soon as all its blocks are announced, while the trainer goes on
// computing earlier layers. Blocks lie back to back in the flat gradient buffer, so every bucket is
// one contiguous range, all-reduced in place without copies.
//
// Every rank issues the same collectives in the same order: bucket 0, 1, ..., then the step's loss
// and correct count (2 floats), whatever order its blocks became ready in. Only the comm thread
// calls the Communicator between begin_step and finish_step; between steps it is idle and the
// caller may use the Communicator itself.
//
// A step, seen from the trainer's thread:
//
//   begin_step ──> ready(p)* ──> finish_step: announce the rest, wait for every bucket, then the
//   (arms)         (forward_backward)        slots; returns the first error, naming the bucket
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "trainers/api/trainer.h"

namespace troupe {

// The default bucket size: the MLP's 940 KB of gradients make two buckets (w0 alone, the rest).
inline constexpr size_t kDefaultBucketBytes = 256 * 1024;

// A contiguous range of the flat gradient buffer: blocks first_block .. last_block (declaration
// indices, first_block <= last_block), all-reduced as one.
struct GradBucket {
  size_t offset = 0;  // in floats
  size_t count = 0;   // in floats
  int first_block = 0;
  int last_block = 0;
};

// Groups `blocks` (laid out back to back in declaration order) into buckets, bucket 0 holding the
// last-declared blocks: walking the blocks from last to first, a block joins the current bucket
// while the bucket stays within `bucket_bytes`, else it starts the next one (so a block larger than
// a bucket is a bucket of its own). bucket_bytes 0, or at least the whole model: one bucket.
std::vector<GradBucket> plan_grad_buckets(const std::vector<ParamBlock>& blocks, size_t bucket_bytes);

// Where the time of bucketed steps went, summed over steps.
struct GradBucketStats {
  int64_t steps = 0;
  int buckets = 0;
  double comm_seconds = 0;        // the comm thread inside all-reduces (buckets and slots)
  double overlapped_seconds = 0;  // the part of comm_seconds before finish_step was called
  double wait_seconds = 0;        // finish_step waiting for the comm thread after forward_backward
  // The share of the communication that overlapped the trainer's forward_backward.
  double hidden_fraction() const { return comm_seconds > 0 ? overlapped_seconds / comm_seconds : 0; }
};

class GradBucketSync final : public GradientHook {
 public:
  struct Options {
    size_t bucket_bytes = kDefaultBucketBytes;
    std::chrono::milliseconds timeout{60000};  // per all-reduce
    // What the buckets travel as (collectives' wire formats: bf16 / f16 halve the bytes, sums stay
    // f32); the loss and correct count always go in f32.
    DType wire = DType::f32;
    // If set, called on the comm thread for each bucket instead of the averaging all-reduce (the
    // bucket's floats weighted already; `co` carries the deadline and the bucket as tag): sharded
    // replicas reduce-scatter (trainers/sharded/sharded_state.h). Its error is the bucket's.
    std::function<Status(size_t bucket, float* data, size_t count, const collectives::CollectiveOptions& co)> reduce;
    // Back-pressure (0: none): ready() returns only once at most this many complete buckets wait
    // for the comm thread, so a trainer's backward cannot run ahead of the reductions by more (the
    // gradients of `--shard gradients` stay resident until their bucket is reduced). It waits only
    // while the comm thread can go on (the next bucket is complete), so it cannot deadlock, and at
    // most until the collective in flight returns or fails.
    int max_ready_ahead = 0;
    // If set, called on the comm thread before each step's first collective; its error is the
    // step's (a sharded replica's overlapped buddy mirror waits there for its round's shift).
    std::function<Status()> before_step;
  };

  // Starts the comm thread. `comm` and `space` must outlive this object.
  GradBucketSync(collectives::Communicator& comm, const ParameterSpace& space, const Options& options);
  // Stops and joins the comm thread; if a step is in flight, after its current all-reduce returns
  // (by that all-reduce's deadline at the latest).
  ~GradBucketSync();
  GradBucketSync(const GradBucketSync&) = delete;
  GradBucketSync& operator=(const GradBucketSync&) = delete;

  const std::vector<GradBucket>& buckets() const { return buckets_; }

  // Arms a step over `grads` (space.size() floats, final values written in place). `epoch` and
  // `step` only name the step in errors. Each bucket is multiplied by `weight` just before its
  // all-reduce (an elastic replica's share of the global batch, Replica::local_rows; 1: as is). The
  // previous step must have finished.
  void begin_step(float* grads, int epoch, int64_t step, float weight = 1.0f);

  // Gradients::ready: block p is final; its bucket is all-reduced once all its blocks are. An
  // unknown Param or a second announcement of a block in one step is remembered and returned by
  // finish_step (the buckets still run, so the other ranks are not left waiting in this step).
  void ready(const Param& p) override;

  // Announces every block not announced yet, waits for every bucket, then all-reduces (averages)
  // `slots` (2 floats: the loss and the correct count) in place. Returns the first error: a bucket's
  // all-reduce failing ("gradient bucket 2 of 2 (blocks w0, 802816 bytes): <the collective's
  // error>", for the caller to prefix with the step), a misuse of ready(), or timeout naming the
  // epoch, step and bucket when the comm thread made no progress for the collective deadline + 10 s. After an error the step is over but the object
  // must not be used for another step; destroy it.
  Status finish_step(float* slots);

  GradBucketStats stats() const;

 private:
  void run();  // the comm thread
  std::string describe(int bucket) const;

  collectives::Communicator& comm_;
  const ParameterSpace& space_;
  const Options options_;
  std::vector<GradBucket> buckets_;
  std::vector<int> bucket_of_block_;

  mutable std::mutex mu_;
  std::condition_variable work_;  // the comm thread waits for a ready bucket
  std::condition_variable done_;  // finish_step waits for the comm thread
  std::condition_variable reduced_;  // ready() waits for the comm thread (max_ready_ahead)
  // Guarded by mu_:
  float* grads_ = nullptr;
  float weight_ = 1.0f;
  float* slots_ = nullptr;  // set by finish_step: the last collective of the step may go
  std::chrono::steady_clock::time_point finish_called_;  // when finish_step was called (slots_ set)
  int epoch_ = 0;
  int64_t step_ = 0;
  std::vector<int> pending_;       // per bucket: blocks not announced yet
  std::vector<bool> announced_;    // per block
  size_t next_ = 0;                // the next collective: bucket index, buckets_.size() = the slots
  bool idle_ = true;               // no step armed (next_ is past the slots)
  Status error_;                   // the step's first collective error
  Status misuse_;                  // the step's first misuse of ready()
  bool stop_ = false;
  GradBucketStats stats_;

  std::thread thread_;  // last: started once everything above is built
};

}  // namespace troupe
