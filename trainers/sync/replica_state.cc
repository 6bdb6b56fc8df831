#include "trainers/sync/replica_state.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "kernels/cpu/ops.h"
#include "trainers/setup/model_file.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/optim/param_init.h"
#include "trainers/sharded/layered_step.h"
#include "trainers/sharded/mirror_recut.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {

Expected<std::unique_ptr<ReplicaState>> ReplicaState::create(const TrainOptions& o, const Replica& replica,
                                                             Trainer& trainer, const ParameterSpace& space,
                                                             const DataSpec& data, const std::string& where) {
  std::unique_ptr<ReplicaState> s(new ReplicaState(space));
  s->where_ = where;
  TROUPE_RETURN_IF_ERROR(s->make_optimizer_state(o, replica, trainer, data, where));
  s->place_buffers(replica);
  return s;
}

// One optimizer over every parameter, or (sharded) the state of this replica's chunks only, over
// the gradient buckets or (--shard parameters) the model's layers.
Status ReplicaState::make_optimizer_state(const TrainOptions& o, const Replica& replica, Trainer& trainer,
                                          const DataSpec& data, const std::string& where) {
  const bool sharded = replica.comm && replica.shard != ShardStage::none;
  layered_ = sharded && replica.shard == ShardStage::parameters;
  oo_ = optimizer_options(o);
  oo_.decay_ranges = matrix_ranges(space_);  // --weight-decay-params matrices
  oo_.decay_ranges_set = true;
  oo_.state_ranges = state_ranges(space_);  // state blocks: their averaged change, not the rule
  units_ = plan_grad_buckets(space_.blocks(), replica.bucket_bytes);
  if (layered_) {  // the units are the model's layers
    LayerModel* layers = trainer.layers();
    if (!layers)
      return invalid_argument("--shard parameters gathers the model layer by layer, and " + where + " does not "
                              "split into layers (Trainer::layers() is null); use --shard gradients");
    if (data.classes <= 0 && !layers->scores_values())
      return invalid_argument("--shard parameters scores the last layer's output with the layers' loss, and " + where +
                              "'s layers score class targets only (LayerModel::scores_values()); this dataset's "
                              "target holds values: use --shard gradients");
    if (!layers->computes_in(o.precision))
      return invalid_argument("--shard parameters runs " + where + " layer by layer, and its layers compute in f32 "
                              "only (LayerModel::computes_in); use --shard gradients with --precision " +
                              std::string(dtype_name(o.precision)));
    layers_ = layers->layer_infos();
    auto units = layer_units(layers_, space_.size());
    if (!units.ok()) return units.status().with_context(where);
    units_ = std::move(*units);
  }
  if (sharded) {
    ShardedState::Options so;
    so.stage = replica.shard;
    so.timeout = replica.timeout;
    so.wire = replica.grad_wire;
    so.measure = replica.shard_stats != nullptr;
    auto made = ShardedState::create(*replica.comm, units_, space_.size(), oo_, so);
    if (!made.ok()) return made.status();
    zero_ = std::move(*made);
    return {};
  }
  auto made = make_optimizer(oo_, space_.size());
  if (!made.ok()) return made.status();
  opt_ = std::move(*made);
  return {};
}

// The gradients with their two slots (sharded: the ShardedState's pages, the slots apart), in the
// communicator's shared arena when it has one that large.
void ReplicaState::place_buffers(const Replica& replica) {
  grad_floats_ = zero_ ? 0 : space_.size() + 2;
  float* const arena =
      grad_floats_ && replica.comm ? static_cast<float*>(replica.comm->shared_buffer(grad_floats_ * sizeof(float)))
                                   : nullptr;
  params_.resize(layered_ ? 0 : space_.size());
  grads_.resize(arena ? 0 : grad_floats_);
  grad_store_ = arena ? arena : grads_.data();
  grad_ = zero_ ? zero_->grads() : grad_store_;
  slots_ = zero_ ? zero_slots_ : grad_store_ + space_.size();
  param_data_ = layered_ ? zero_->params() : params_.data();
}

Expected<ReplicaState::Start> ReplicaState::start(const TrainOptions& o, const Replica& replica,
                                                  int64_t steps_per_epoch, int rank) {
  if (layered_) zero_->init_params(space_, o.seed); else init_parameters(space_, o.seed, params_.data());
  if (rank == 0 && !o.save_path.empty())  // a --save that cannot be written fails now, not after training
    TROUPE_RETURN_IF_ERROR(check_save_target(o.save_path));
  if (!o.init_from.empty() && !replica.resume) {  // every replica loads the same file: identical start
    if (layered_) {  // read whole, this replica's chunks kept
      std::vector<float> whole(space_.size());
      init_parameters(space_, o.seed, whole.data());  // --init-partial: the blocks the file lacks
      TROUPE_RETURN_IF_ERROR(load_model_into(o.init_from, space_, o.model, o.init_partial, whole.data()));
      zero_->load_params(whole.data());
    } else {
      TROUPE_RETURN_IF_ERROR(load_model_into(o.init_from, space_, o.model, o.init_partial, params_.data()));
    }
    if (rank == 0) spdlog::info("parameters from {}{}", o.init_from, o.init_partial ? " (the blocks it has)" : "");
  }
  Start at;
  if (replica.mirror.step >= 0 && zero_) {
    TROUPE_RETURN_IF_ERROR(resume_from_mirror(replica, steps_per_epoch, &at));
  } else if (replica.resume) {
    TROUPE_RETURN_IF_ERROR(resume(replica, steps_per_epoch, &at));
  }
  return at;
}

Status ReplicaState::resume_from_mirror(const Replica& replica, int64_t steps_per_epoch, Start* at) {
  const bool recut = replica.mirror.from_world > 0;  // rounds of a group of another size or numbering
  auto back = recut ? restore_recut(*replica.comm, *zero_, !layered_, param_data_, replica.mirror, replica.timeout)
                    : restore_from_mirror(*replica.comm, *zero_, !layered_, param_data_, replica.mirror, replica.timeout);
  if (!back.ok()) return back.status().with_context(where_);
  checkpoint::TrainingState position;
  position.step = back->step;
  position.epoch = back->epoch;
  position.epoch_step = back->epoch_step;
  const checkpoint::ResumeAt where = checkpoint::resume_at(position, steps_per_epoch);
  at->step = back->step;
  at->first_epoch = where.epoch;
  at->skip_steps = where.skip_steps;
  const bool own = replica.mirror.hold && replica.mirror.hold->round_of(replica.mirror.step) != nullptr;
  if (recut)
    spdlog::info("going on from the buddy mirrors of step {}, the shards of {} ranks re-cut for {}: epoch {} after {} "
                 "of its steps ({} bytes moved in all)", at->step, replica.mirror.from_world, replica.comm->size(),
                 at->first_epoch, at->skip_steps, back->bytes);
  else spdlog::info("going on from the buddy mirrors of step {}: epoch {} after {} of its steps (this replica's shard "
               "from {}; {} bytes moved in all)", at->step, at->first_epoch, at->skip_steps,
               own ? "its own memory"
                   : "rank " + std::to_string((replica.comm->rank() + replica.mirror.distance) % replica.comm->size()),
               back->bytes);
  if (replica.mirror.restored) replica.mirror.restored(back->bytes);
  return {};
}

Status ReplicaState::resume(const Replica& replica, int64_t steps_per_epoch, Start* at) {
  const checkpoint::TrainingState& r = *replica.resume;
  const std::string restoring = "restoring the checkpoint of step " + std::to_string(r.step);
  if (zero_ && replica.resume_ranges) {  // this replica's ranges only, never the whole checkpoint
    std::vector<checkpoint::Range> owned;
    for (const auto& [begin, end] : zero_->owned_ranges()) owned.push_back({begin, end});
    auto mine = replica.resume_ranges(space_.size(), layered_ ? owned : std::vector<checkpoint::Range>{{0, space_.size()}},
                                      owned);
    if (!mine.ok()) return mine.status().with_context(restoring);
    TROUPE_RETURN_IF_ERROR(zero_->load_owned_optimizer(mine->optimizer).with_context(restoring));
    if (layered_) {
      zero_->load_owned_params(mine->params.data());
    } else {  // into the buffer param_data points at
      std::copy(mine->params.begin(), mine->params.end(), params_.begin());
    }
  } else {
    if (r.params.size() != space_.size()) {
      return invalid_argument("the checkpoint holds " + std::to_string(r.params.size()) + " parameters; " + where_ +
                              " has " + std::to_string(space_.size()) + " (another model or trainer settings?)");
    }
    TROUPE_RETURN_IF_ERROR((zero_ ? zero_->load_optimizer(r.optimizer) : opt_->load_state(r.optimizer, 0))
                               .with_context(restoring));
    if (layered_) zero_->load_params(r.params.data()); else params_ = r.params;
  }
  at->step = r.step;
  const checkpoint::ResumeAt where = checkpoint::resume_at(r, steps_per_epoch);
  at->first_epoch = where.epoch;
  at->skip_steps = where.skip_steps;
  spdlog::info("resuming from the checkpoint of step {}: epoch {} after {} of its steps", at->step, at->first_epoch,
               at->skip_steps);
  return {};
}

void ReplicaState::zero_grads() {
  if (zero_) zero_->zero_grads(); else std::fill_n(grad_store_, grad_floats_, 0.0f);
  slots_[0] = slots_[1] = 0.0f;
}

Expected<bool> ReplicaState::grads_finite() {
  if (zero_) return zero_->all_finite();
  return kernels::cpu::all_finite(grad_, space_.size());
}

Status ReplicaState::update(float lr, float unscale, float clip, const std::string& at) {
  if (zero_) {  // this replica's chunks: unscaled, clipped by the norm over all of them, updated
    if (unscale != 1.0f) zero_->scale(unscale);
    if (clip > 0) {
      auto norm = zero_->clip_grad_norm(clip);
      if (!norm.ok()) return norm.status().with_context(where_ + at);
    }
    zero_->step(param_data_, lr);
    // Every replica holds the whole updated parameters again (stage parameters: each layer is
    // gathered when it is next used).
    if (!layered_) TROUPE_RETURN_IF_ERROR(zero_->gather(params_.data()).with_context(where_ + at));
    return {};
  }
  if (unscale != 1.0f) kernels::cpu::scale(grad_, space_.size(), unscale);
  if (clip > 0)  // after the all-reduce: the averaged gradient, the same on every replica
    clip_grad_norm(grad_, space_.size(), clip, oo_.state_ranges);
  opt_->set_lr(lr);
  opt_->step(params_.data(), grad_);
  return {};
}

Expected<std::vector<float>> ReplicaState::slice_params(size_t begin, size_t end) {
  if (layered_) return zero_->param_slice(begin, end);
  return std::vector<float>(params_.begin() + static_cast<std::ptrdiff_t>(begin),
                            params_.begin() + static_cast<std::ptrdiff_t>(end));
}

Expected<OptimizerState> ReplicaState::slice_state(size_t begin, size_t end) {
  if (zero_) return zero_->optimizer_state(begin, end);
  return opt_->save_state(begin, end);
}

Expected<bool> ReplicaState::finish(bool whole) {
  if (!layered_) return kernels::cpu::all_finite(params_.data(), params_.size());
  if (whole) {
    TROUPE_RETURN_IF_ERROR(zero_->gather_all().with_context(where_ + ": gathering the trained parameters"));
    params_.assign(param_data_, param_data_ + space_.size());
    zero_->release_all();
  }
  auto ok = zero_->params_finite();
  if (!ok.ok()) return ok.status().with_context(where_);
  return *ok;
}

}  // namespace troupe
