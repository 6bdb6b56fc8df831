#include "trainers/sync/grad_buckets.h"

#include <algorithm>

#include "kernels/cpu/ops.h"

namespace troupe {

using Clock = std::chrono::steady_clock;

std::vector<GradBucket> plan_grad_buckets(const std::vector<ParamBlock>& blocks, size_t bucket_bytes) {
  std::vector<GradBucket> buckets;
  for (int i = static_cast<int>(blocks.size()) - 1; i >= 0; --i) {
    const Param& p = blocks[i].param;
    const bool fits = !buckets.empty() &&
                      (bucket_bytes == 0 || (buckets.back().count + p.numel) * sizeof(float) <= bucket_bytes);
    if (fits) {  // blocks lie back to back: block i ends where the bucket starts
      GradBucket& b = buckets.back();
      b.offset = p.offset;
      b.count += p.numel;
      b.first_block = i;
    } else {
      buckets.push_back(GradBucket{p.offset, p.numel, i, i});
    }
  }
  return buckets;
}

GradBucketSync::GradBucketSync(collectives::Communicator& comm, const ParameterSpace& space, const Options& options)
    : comm_(comm),
      space_(space),
      options_(options),
      buckets_(plan_grad_buckets(space.blocks(), options.bucket_bytes)),
      bucket_of_block_(space.blocks().size()),
      pending_(buckets_.size()),
      announced_(space.blocks().size()) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int i = buckets_[b].first_block; i <= buckets_[b].last_block; ++i) bucket_of_block_[i] = static_cast<int>(b);
  next_ = buckets_.size() + 1;
  stats_.buckets = static_cast<int>(buckets_.size());
  thread_ = std::thread([this] { run(); });
}

GradBucketSync::~GradBucketSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  reduced_.notify_all();
  thread_.join();
}

void GradBucketSync::begin_step(float* grads, int epoch, int64_t step, float weight) {
  std::lock_guard<std::mutex> lock(mu_);
  grads_ = grads;
  weight_ = weight;
  slots_ = nullptr;
  epoch_ = epoch;
  step_ = step;
  for (size_t b = 0; b < buckets_.size(); ++b)
    pending_[b] = buckets_[b].last_block - buckets_[b].first_block + 1;
  std::fill(announced_.begin(), announced_.end(), false);
  next_ = 0;
  idle_ = false;
  error_ = Status();
  misuse_ = Status();
}

void GradBucketSync::ready(const Param& p) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_) return;  // outside a bucketed step (e.g. a micro-batch of an accumulated step)
    const auto& blocks = space_.blocks();
    if (p.index < 0 || p.index >= static_cast<int>(blocks.size()) || blocks[p.index].param.offset != p.offset ||
        blocks[p.index].param.numel != p.numel) {
      if (misuse_.ok())
        misuse_ = invalid_argument("grads.ready() was given a Param that setup() did not declare (index " +
                                   std::to_string(p.index) + "); pass the Params that ParameterSpace::declare returned");
      return;
    }
    if (announced_[p.index]) {
      if (misuse_.ok())
        misuse_ = invalid_argument("grads.ready() was called twice for block '" + blocks[p.index].name +
                                   "' in one forward_backward; announce each block once, when its gradient is final");
      return;
    }
    announced_[p.index] = true;
    // Only the bucket the comm thread waits for needs a wake-up: it re-checks the next ones itself.
    const int b = bucket_of_block_[p.index];
    wake = --pending_[b] == 0 && static_cast<size_t>(b) == next_;
  }
  if (wake) work_.notify_one();
  if (options_.max_ready_ahead <= 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  reduced_.wait(lock, [&] {
    if (idle_ || stop_ || next_ >= buckets_.size() || pending_[next_] != 0) return true;  // nothing to wait for
    int waiting = 0;
    for (size_t i = next_; i < buckets_.size(); ++i) waiting += pending_[i] == 0;
    return waiting <= options_.max_ready_ahead;
  });
}

Status GradBucketSync::finish_step(float* slots) {
  const auto wait_start = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (idle_) return internal_error("GradBucketSync::finish_step without begin_step");
  for (size_t i = 0; i < announced_.size(); ++i)
    if (!announced_[i]) {
      announced_[i] = true;
      --pending_[bucket_of_block_[i]];
    }
  slots_ = slots;
  finish_called_ = wait_start;
  work_.notify_one();
  // Each collective returns by its own deadline; this bound only guards against a comm thread that
  // stopped making progress. The comm thread wakes this one only when the step is over.
  const auto no_progress = options_.timeout + std::chrono::seconds(10);
  while (next_ <= buckets_.size()) {
    const size_t seen = next_;
    if (!done_.wait_for(lock, no_progress, [&] { return next_ > buckets_.size(); }) && next_ == seen) {
      idle_ = true;  // the step is abandoned; the comm thread issues nothing more for it
      return Status(Code::timeout, "the gradient all-reduce at epoch " + std::to_string(epoch_) + ", step " +
                                       std::to_string(step_) + " made no progress on " +
                                       (seen < buckets_.size() ? describe(static_cast<int>(seen)) : "the loss slots") +
                                       " for " + std::to_string(no_progress.count()) + " ms");
    }
  }
  idle_ = true;
  stats_.steps += 1;
  stats_.wait_seconds += std::chrono::duration<double>(Clock::now() - wait_start).count();
  if (!error_.ok()) return error_;
  return misuse_;
}

GradBucketStats GradBucketSync::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::string GradBucketSync::describe(int bucket) const {
  const GradBucket& b = buckets_[bucket];
  const auto& blocks = space_.blocks();
  std::string names = blocks[b.first_block].name;
  if (b.last_block != b.first_block) names += ".." + blocks[b.last_block].name;
  return "gradient bucket " + std::to_string(bucket + 1) + " of " + std::to_string(buckets_.size()) + " (blocks " +
         names + ", " + std::to_string(b.count * sizeof(float)) + " bytes)";
}

void GradBucketSync::run() {
  collectives::CollectiveOptions co;
  co.timeout = options_.timeout;
  const size_t slots_index = buckets_.size();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] {
      if (stop_) return true;
      if (idle_ || next_ > slots_index) return false;
      return next_ < slots_index ? pending_[next_] == 0 : slots_ != nullptr;
    });
    if (stop_) return;
    const size_t i = next_;
    float* data = i < slots_index ? grads_ + buckets_[i].offset : slots_;
    const size_t count = i < slots_index ? buckets_[i].count : 2;
    co.tag = i;
    co.wire = i < slots_index ? options_.wire : DType::f32;
    const float weight = i < slots_index ? weight_ : 1.0f;  // the slots come weighted by the caller
    lock.unlock();
    if (weight != 1.0f) kernels::cpu::scale(data, count, weight);
    const auto start = Clock::now();
    Status st = i == 0 && options_.before_step ? options_.before_step() : Status();
    if (st.ok())
      st = i < slots_index && options_.reduce
               ? options_.reduce(i, data, count, co)
               : comm_.allreduce(data, data, count, DType::f32, collectives::ReduceOp::avg, co);
    const auto end = Clock::now();
    lock.lock();
    stats_.comm_seconds += std::chrono::duration<double>(end - start).count();
    // The part before finish_step was called ran beside the trainer's forward_backward.
    const auto overlap_end = slots_ ? std::min(end, finish_called_) : end;
    if (overlap_end > start) stats_.overlapped_seconds += std::chrono::duration<double>(overlap_end - start).count();
    if (idle_) continue;  // finish_step gave up on this step
    if (!st.ok()) {
      // The caller names the step (begin_step's epoch and step are for its own timeout error).
      error_ = st.with_context(i < slots_index ? describe(static_cast<int>(i)) : "the loss and correct count");
      next_ = slots_index + 1;  // nothing more this step: the group is broken
    } else {
      ++next_;
    }
    if (next_ > slots_index) done_.notify_one();
    if (options_.max_ready_ahead > 0) reduced_.notify_all();
  }
}

}  // namespace troupe
