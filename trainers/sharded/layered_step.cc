#include "trainers/sharded/layered_step.h"

#include "kernels/cpu/ops.h"
#include "trainers/pipeline/partition.h"

namespace troupe {

Expected<std::vector<GradBucket>> layer_units(const std::vector<LayerInfo>& layers, size_t total) {
  TROUPE_RETURN_IF_ERROR(pipeline::check_layers(layers));
  std::vector<GradBucket> units;
  size_t at = 0;
  for (const LayerInfo& l : layers) {
    GradBucket u;
    u.offset = l.params.front().offset;
    for (const Param& p : l.params) u.count += p.numel;
    u.first_block = l.params.front().index;
    u.last_block = l.params.back().index;
    if (u.offset != at)
      return invalid_argument("layer '" + l.name + "' starts at float " + std::to_string(u.offset) + ", not " +
                              std::to_string(at) + ": --shard parameters needs the layers to hold every block");
    at += u.count;
    units.push_back(u);
  }
  if (at != total)
    return invalid_argument("the layers hold " + std::to_string(at) + " of the model's " + std::to_string(total) +
                            " parameters: --shard parameters needs the layers to hold every block");
  return units;
}

LayeredStep::LayeredStep(LayerModel& model, std::vector<LayerInfo> layers, ShardedState& state,
                         std::chrono::milliseconds timeout)
    : model_(model), layers_(std::move(layers)), state_(state), timeout_(timeout) {
  for (const LayerInfo& l : layers_) {
    GradBucket u;
    u.offset = l.params.front().offset;
    for (const Param& p : l.params) u.count += p.numel;
    units_.push_back(u);
  }
  acts_.resize(layers_.size());
}

Expected<BatchStats> LayeredStep::forward_backward(const Batch& batch, float weight) {
  if (!batch.labels)
    return invalid_argument("--shard parameters trains models of class targets for now (LayerModel::output_loss "
                            "takes labels); use --shard gradients");
  const size_t count = layers_.size();
  const int64_t rows = batch.size;
  float* const params = state_.params();
  float* const grads = state_.grads();
  auto params_of = [&](size_t l) { return Parameters(params + units_[l].offset, units_[l].count, units_[l].offset); };
  auto grads_of = [&](size_t l) { return Gradients(grads + units_[l].offset, units_[l].count, nullptr, units_[l].offset); };
  std::vector<CommQueue::Ticket> gathered(count, -1);
  auto gather = [&](size_t l) { gathered[l] = queue_.submit([this, l] { return state_.gather_unit(l); }); };
  // After an error, nothing more goes out: what is queued is dropped, what runs ends by its deadline.
  struct Guard {
    CommQueue& queue;
    bool armed = true;
    ~Guard() {
      if (!armed) return;
      queue.abort();
      (void)queue.drain();
    }
  } guard{queue_};
  auto where = [&](size_t l) { return "layer " + std::to_string(l) + " ('" + layers_[l].name + "')"; };

  gather(0);
  if (count > 1) gather(1);
  for (size_t l = 0; l < count; ++l) {
    TROUPE_RETURN_IF_ERROR(queue_.wait(gathered[l]));
    acts_[l].resize(static_cast<size_t>(rows * layers_[l].out_features));
    const float* in = l == 0 ? batch.inputs : acts_[l - 1].data();
    TROUPE_RETURN_IF_ERROR(model_.forward_layer(static_cast<int>(l), in, rows, params_of(l), acts_[l].data())
                               .with_context(where(l) + " forward"));
    if (l + 1 < count) {  // the last layer stays for backward
      state_.release_unit(l);
      if (l + 2 < count) gather(l + 2);
    }
  }
  dout_.resize(acts_[count - 1].size());
  auto stats = model_.output_loss(acts_[count - 1].data(), batch.labels, rows, dout_.data());
  if (!stats.ok()) return stats.status().with_context("the output loss");
  if (weight != 1.0f) kernels::cpu::scale(dout_.data(), dout_.size(), weight);

  if (count >= 2) gather(count - 2);
  for (size_t l = count; l-- > 0;) {
    if (l + 1 < count) TROUPE_RETURN_IF_ERROR(queue_.wait(gathered[l]));
    const float* in = l == 0 ? batch.inputs : acts_[l - 1].data();
    if (l > 0) din_.resize(acts_[l - 1].size());
    state_.prepare_bucket(l);  // the gradient pages this layer writes, in one call
    Gradients g = grads_of(l);
    TROUPE_RETURN_IF_ERROR(model_.backward_layer(static_cast<int>(l), in, acts_[l].data(), dout_.data(), rows,
                                                 params_of(l), g, l > 0 ? din_.data() : nullptr)
                               .with_context(where(l) + " backward"));
    queue_.submit([this, l, grads] {
      collectives::CollectiveOptions co;
      co.timeout = timeout_;
      co.tag = l;
      return state_.reduce_bucket(l, grads + units_[l].offset, units_[l].count, co)
          .with_context("reduce-scattering the gradients of layer " + std::to_string(l));
    });
    state_.release_unit(l);
    if (l >= 2) gather(l - 2);
    std::swap(dout_, din_);
  }
  TROUPE_RETURN_IF_ERROR(queue_.drain());
  guard.armed = false;
  return *stats;
}

}  // namespace troupe
