#include "trainers/sync/gradient_sync.h"

#include <cmath>

#include "kernels/cpu/ops.h"
#include "trainers/sync/micro_batches.h"

namespace troupe {
namespace {

// The buckets of a plain (bucket_bytes > 0) or sharded (by buckets; 0: one) replica; none for a
// replica of one, an unbucketed plain one, or a layered one (its own collectives).
std::unique_ptr<GradBucketSync> make_buckets(const Replica& replica, ReplicaState& state, const ParameterSpace& space,
                                             BuddyMirror* mirror) {
  if (!replica.comm || state.layered() || (replica.bucket_bytes == 0 && !state.sharded())) return nullptr;
  GradBucketSync::Options bo{replica.bucket_bytes, replica.timeout, replica.grad_wire, {}, 0, {}};
  if (mirror && mirror->overlapped()) bo.before_step = [mirror] { return mirror->wait(); };
  if (ShardedState* z = state.zero()) {
    bo.reduce = [z](size_t b, float* data, size_t count, const collectives::CollectiveOptions& co) {
      return z->reduce_bucket(b, data, count, co);
    };
    // Gradients: backward may run at most two complete buckets ahead of the reductions.
    if (replica.shard == ShardStage::gradients) bo.max_ready_ahead = 2;
  }
  return std::make_unique<GradBucketSync>(*replica.comm, space, bo);
}

}  // namespace

GradientSync::GradientSync(const Replica& replica, ReplicaState& state, Trainer& trainer, const ParameterSpace& space,
                           BuddyMirror* mirror)
    : replica_(replica),
      state_(state),
      trainer_(trainer),
      space_(space),
      params_(state.params(), space.size()),
      mirror_(mirror),
      buckets_(make_buckets(replica, state, space, mirror)),
      grads_(state.grad(), space.size(), buckets_.get()) {
  if (state.layered())
    layered_ = std::make_unique<LayeredStep>(*trainer.layers(), state.layers(), state.units(), *state.zero(),
                                             replica.timeout);
  sync_.timeout = replica.timeout;
}

Expected<BatchStats> GradientSync::forward_backward(const Batch& batch, float weight, int epoch, int64_t step_in_epoch,
                                                    int parts) {
  weight_ = weight;
  if (buckets_) buckets_->begin_step(state_.grad(), epoch, step_in_epoch + 1, weight);
  if (layered_) {  // its collectives begin with the first layer's gather: the mirror's round first
    if (mirror_) TROUPE_RETURN_IF_ERROR(mirror_->wait().with_context("the buddy mirror's round"));
    return layered_->forward_backward(batch, weight);
  }
  return forward_backward_parts(trainer_, batch, params_, grads_, parts, micro_grads_);
}

// Without buckets: the gradients and the two slots after them in one all-reduce, or in two when the
// gradients travel compressed (the slots stay f32).
Status GradientSync::allreduce_plain() {
  const auto avg = collectives::ReduceOp::avg;
  float* all = state_.grads_and_slots();
  const size_t count = state_.grads_and_slots_floats();
  collectives::CollectiveOptions co = sync_;
  if (replica_.grad_wire == DType::f32) return replica_.comm->allreduce(all, all, count, DType::f32, avg, co);
  const size_t n = count - 2;
  co.wire = replica_.grad_wire;
  TROUPE_RETURN_IF_ERROR(replica_.comm->allreduce(all, all, n, DType::f32, avg, co));
  co.wire = DType::f32;
  return replica_.comm->allreduce(all + n, all + n, 2, DType::f32, avg, co);
}

Status GradientSync::reduce(BatchStats* stats, int64_t rows) {
  if (!replica_.comm) return {};
  const float weight = weight_;
  // (buckets and the layered step weight the gradients themselves, before they are reduced)
  if (!buckets_ && !layered_ && weight != 1.0f) kernels::cpu::scale(state_.grad(), space_.size(), weight);
  float* slots = state_.slots();
  slots[0] = stats->loss * weight;
  slots[1] = rows > 0 ? static_cast<float>(stats->correct) : 0.0f;  // a padding row is no example
  Status st = buckets_   ? buckets_->finish_step(slots)
              : layered_ ? replica_.comm->allreduce(slots, slots, 2, DType::f32, collectives::ReduceOp::avg, sync_)
                         : allreduce_plain();
  if (!st.ok()) return st;
  stats->loss = slots[0];
  stats->correct = stats->correct < 0 ? -1 : std::llround(slots[1] * replica_.comm->size());
  return {};
}

void GradientSync::report(const Replica& replica) const {
  if (buckets_ && replica.bucket_stats) *replica.bucket_stats = buckets_->stats();
  if (state_.zero() && replica.shard_stats) *replica.shard_stats = state_.zero()->stats();
  if (layered_ && replica.shard_stats) replica.shard_stats->layer_comm_seconds = layered_->comm_seconds();
}

}  // namespace troupe
