// A sync replica's model state: its parameters, its gradients with the two slots after them (the
// step's loss and correct count, all-reduced with the gradients in one collective), and the
// optimizer — one over every parameter, or under --shard the ShardedState of this replica's chunks
// (trainers/sharded/), whose pages hold the gradients and, --shard parameters, the parameters, the
// model's layers then being the units. Where the state starts (the seed, --init-from, a checkpoint)
// and how a step's update is applied (the f16 loss scale divided out, clipping, the rate) are here.
//
// Plain sync over shared memory with an arena that large keeps the gradients and slots in it
// (Communicator::shared_buffer), so every all-reduce works in place, no copy in or out; the job's
// workers ask for the arena when /dev/shm has room (job_worker.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trainers/api/trainer.h"
#include "trainers/optim/optimizer.h"
#include "trainers/sharded/sharded_state.h"
#include "trainers/sync/grad_buckets.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {

class ReplicaState {
 public:
  // Where the replica's steps begin: after `step` steps, in `first_epoch`, having skipped the
  // first `skip_steps` of it (done before the checkpoint it resumed from).
  struct Start {
    int64_t step = 0;
    int first_epoch = 1;
    int64_t skip_steps = 0;
  };

  // The state of `trainer`'s parameters `space` for `replica` (its comm and --shard stage).
  // invalid_argument when --shard parameters meets a model that does not split into layers, whose
  // layers score classes only on value targets (`data`), or compute in f32 only under another
  // --precision; the optimizer's errors (bad settings). `where` names the trainer in errors.
  static Expected<std::unique_ptr<ReplicaState>> create(const TrainOptions& o, const Replica& replica,
                                                        Trainer& trainer, const ParameterSpace& space,
                                                        const DataSpec& data, const std::string& where);

  // Initialises the parameters from the seed, then --init-from (a fresh start) or replica.resume
  // (its parameters, optimizer state and position; a sharded replica may read only its ranges);
  // rank 0 first checks that a --save can be written. Errors name the file or checkpoint.
  Expected<Start> start(const TrainOptions& o, const Replica& replica, int64_t steps_per_epoch, int rank);

  bool sharded() const { return zero_ != nullptr; }
  bool layered() const { return layered_; }
  ShardedState* zero() const { return zero_.get(); }
  float* grad() const { return grad_; }            // the trainer's flat gradients
  float* slots() const { return slots_; }          // [loss, correct] after them (sharded: apart)
  float* params() const { return param_data_; }    // the trainer's flat parameters
  // Plain sync: the gradients and the slots after them, as one all-reduce moves them.
  float* grads_and_slots() const { return grad_store_; }
  size_t grads_and_slots_floats() const { return grad_floats_; }
  std::vector<float>& whole_params() { return params_; }  // empty under --shard parameters
  const std::vector<GradBucket>& units() const { return units_; }  // buckets, or layers (layered)
  const std::vector<LayerInfo>& layers() const { return layers_; }
  const OptimizerOptions& optimizer_settings() const { return oo_; }
  std::string describe() const { return zero_ ? zero_->describe() : opt_->describe(); }

  // Before a step: the API promises zeroed gradients; the slots too.
  void zero_grads();
  // Whether the reduced gradients are finite (agreed by every replica when sharded).
  Expected<bool> grads_finite();
  // The step's update at rate `lr`: the gradients multiplied by `unscale` (f16: 1 / the loss
  // scale) when it is not 1, clipped to `clip` (> 0) by the whole model's norm, applied; sharded,
  // every replica then holds the whole parameters again (--shard parameters: gathered per layer
  // when next used). Errors of the collectives, naming `at`.
  Status update(float lr, float unscale, float clip, const std::string& at);

  // The parameters and optimizer state of [begin, end), for a checkpoint's slice.
  Expected<std::vector<float>> slice_params(size_t begin, size_t end);
  Expected<OptimizerState> slice_state(size_t begin, size_t end);
  // After training: whether the parameters are finite (agreed when layered). `whole` (collective:
  // every replica must ask alike): --shard parameters gathers them into whole_params() first.
  Expected<bool> finish(bool whole);

 private:
  ReplicaState(const ParameterSpace& space) : space_(space) {}
  Status make_optimizer_state(const TrainOptions& o, const Replica& replica, Trainer& trainer, const DataSpec& data,
                              const std::string& where);
  void place_buffers(const Replica& replica);
  Status resume(const Replica& replica, int64_t steps_per_epoch, Start* at);
  // Replica::mirror: this replica's chunks from its own round or its buddy's (collective).
  Status resume_from_mirror(const Replica& replica, int64_t steps_per_epoch, Start* at);

  const ParameterSpace& space_;
  std::string where_;
  bool layered_ = false;
  OptimizerOptions oo_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<ShardedState> zero_;
  std::vector<GradBucket> units_;
  std::vector<LayerInfo> layers_;
  std::vector<float> params_, grads_;
  size_t grad_floats_ = 0;
  float* grad_store_ = nullptr;
  float zero_slots_[2] = {0, 0};
  float* grad_ = nullptr;
  float* slots_ = nullptr;
  float* param_data_ = nullptr;
};

}  // namespace troupe
