// How a sync replica's step computes and synchronises its gradients, one of four ways chosen once
// from the Replica: plain (forward_backward, then one all-reduce of the gradients and the two
// slots; compressed wires send the slots apart in f32), buckets (GradBucketSync all-reduces each
// bucket on a communication thread as backward announces it ready: grad_buckets.h), sharded
// (the buckets reduce-scattered into this replica's chunks: trainers/sharded/sharded_state.h), or
// layered (--shard parameters: LayeredStep runs the model layer by layer with its own gathers and
// reductions: trainers/sharded/layered_step.h). A replica of one synchronises nothing.
//
// Every way applies the replica's weight (its rows relative to an even share, StepRows) before
// the averaging reduction, so the group's update is the whole global batch's mean gradient.
#pragma once

#include <memory>
#include <vector>

#include "trainers/sharded/buddy_mirror.h"
#include "trainers/sharded/layered_step.h"
#include "trainers/sync/grad_buckets.h"
#include "trainers/sync/replica_state.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {

class GradientSync {
 public:
  // `state`, `trainer`, `space`, the replica's communicator and `mirror` (if any: a sharded live
  // replica's buddy mirror, whose overlapped shift each step waits for before its first collective)
  // must outlive it.
  GradientSync(const Replica& replica, ReplicaState& state, Trainer& trainer, const ParameterSpace& space,
               BuddyMirror* mirror = nullptr);

  // The step's forward and backward of `batch` (--accumulate `parts` micro-batches), this
  // replica's gradient weighted by `weight`. The gradients must be zeroed (ReplicaState::zero_grads).
  Expected<BatchStats> forward_backward(const Batch& batch, float weight, int epoch, int64_t step_in_epoch, int parts);
  // After forward_backward: the gradients averaged over the replicas with the step's loss (weighted
  // as forward_backward's gradient was) and correct count (none for a padding row: `rows` 0), which
  // `stats` then holds for the whole step. Errors of the collectives (a replica that died or timed out).
  Status reduce(BatchStats* stats, int64_t rows);

  // The parameters as the trainer sees them (ReplicaState::params()).
  const Parameters& params() const { return params_; }
  LayeredStep* layered() const { return layered_.get(); }
  // Seconds spent in the buckets' reductions so far (0 without buckets).
  double comm_seconds() const { return buckets_ ? buckets_->stats().comm_seconds : 0; }
  // Hands the measurements to what the replica asked for (bucket and shard stats).
  void report(const Replica& replica) const;

 private:
  Status allreduce_plain();

  const Replica& replica_;
  ReplicaState& state_;
  Trainer& trainer_;
  const ParameterSpace& space_;
  const Parameters params_;
  BuddyMirror* const mirror_;
  std::unique_ptr<GradBucketSync> buckets_;
  std::unique_ptr<LayeredStep> layered_;
  Gradients grads_;
  std::vector<float> micro_grads_;  // one micro-batch's gradients (--accumulate)
  float weight_ = 1.0f;             // the step's weight, from forward_backward to reduce
  collectives::CollectiveOptions sync_;
};

}  // namespace troupe
