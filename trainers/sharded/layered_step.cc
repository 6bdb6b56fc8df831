#include "trainers/sharded/layered_step.h"

#include "trainers/pipeline/layer_loss.h"

#include <algorithm>

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
  for (size_t l = 0; l < layers.size(); ++l)
    for (const Param& p : layers[l].shared) {
      bool inside = false;  // wholly inside one earlier layer's range
      for (size_t u = 0; u < l; ++u)
        inside = inside || (p.offset >= units[u].offset && p.offset + p.numel <= units[u].offset + units[u].count);
      if (!inside)
        return invalid_argument("layer '" + layers[l].name + "' shares block #" + std::to_string(p.index) +
                                ", which no earlier layer owns: a shared block (tied weights) must be one of an "
                                "earlier layer's");
    }
  if (at != total)
    return invalid_argument("the layers hold " + std::to_string(at) + " of the model's " + std::to_string(total) +
                            " parameters: --shard parameters needs the layers to hold every block");
  return units;
}

LayeredStep::LayeredStep(LayerModel& model, std::vector<LayerInfo> layers, std::vector<GradBucket> units,
                         ShardedState& state, std::chrono::milliseconds timeout)
    : model_(model), layers_(std::move(layers)), state_(state), timeout_(timeout), units_(std::move(units)) {
  acts_.resize(layers_.size());
  owners_.resize(layers_.size());
  pinned_.assign(layers_.size(), false);
  for (size_t l = 0; l < layers_.size(); ++l)
    for (const Param& p : layers_[l].shared)
      for (size_t u = 0; u < l; ++u)
        if (p.offset >= units_[u].offset && p.offset < units_[u].offset + units_[u].count) {
          if (std::find(owners_[l].begin(), owners_[l].end(), u) == owners_[l].end()) owners_[l].push_back(u);
          pinned_[u] = true;
        }
}

Parameters LayeredStep::params_of(size_t l) const {
  if (!owners_[l].empty()) return Parameters(state_.params(), total(), 0);  // tied: the whole model's view
  return Parameters(state_.params() + units_[l].offset, units_[l].count, units_[l].offset);
}

Gradients LayeredStep::grads_of(size_t l) const {
  if (!owners_[l].empty()) return Gradients(state_.grads(), total(), nullptr, 0);
  return Gradients(state_.grads() + units_[l].offset, units_[l].count, nullptr, units_[l].offset);
}

Expected<BatchStats> LayeredStep::forward_backward(const Batch& batch, float weight) {
  if (!batch.labels && !(batch.targets && model_.scores_values()))
    return invalid_argument("--shard parameters scores the last layer's output with the layers' loss, and these "
                            "layers score class targets only (LayerModel::scores_values()); use --shard gradients");
  const size_t count = layers_.size();
  const int64_t rows = batch.size;
  float* const grads = state_.grads();
  // Per unit: the gather queued and not waited for yet (-1: none), and whether its parameters are
  // whole now. A unit a later layer shares (tied weights) stays whole from its forward to its backward.
  std::vector<CommQueue::Ticket> pending(count, -1);
  std::vector<bool> whole(count, false);
  auto gather = [&](size_t l) {
    if (whole[l]) return;
    whole[l] = true;
    pending[l] = queue_.submit([this, l] { return state_.gather_unit(l); });
  };
  auto ready = [&](size_t l) -> Status {
    gather(l);
    if (pending[l] < 0) return {};
    const CommQueue::Ticket t = pending[l];
    pending[l] = -1;
    return queue_.wait(t);
  };
  auto release = [&](size_t l) {
    state_.release_unit(l);
    whole[l] = false;
  };
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
    TROUPE_RETURN_IF_ERROR(ready(l));
    for (size_t u : owners_[l]) TROUPE_RETURN_IF_ERROR(ready(u));
    acts_[l].resize(static_cast<size_t>(rows * layers_[l].out_features));
    const float* in = l == 0 ? batch.inputs : acts_[l - 1].data();
    TROUPE_RETURN_IF_ERROR(model_.forward_layer_kept(static_cast<int>(l), 0, in, rows, params_of(l), acts_[l].data())
                               .with_context(where(l) + " forward"));
    if (l + 1 < count) {  // the last layer stays for backward
      if (!pinned_[l]) release(l);
      if (l + 2 < count) gather(l + 2);
    }
  }
  dout_.resize(acts_[count - 1].size());
  auto stats = layer_loss(model_, acts_[count - 1].data(), TargetRows::of(batch), rows, dout_.data());
  if (!stats.ok()) return stats.status().with_context("the output loss");
  // An elastic replica's share, and f16's loss scale (the layers round dout as the whole model does).
  const float scale = weight * batch.loss_scale;
  if (scale != 1.0f) kernels::cpu::scale(dout_.data(), dout_.size(), scale);

  if (count >= 2) gather(count - 2);
  for (size_t l = count; l-- > 0;) {
    TROUPE_RETURN_IF_ERROR(ready(l));
    for (size_t u : owners_[l]) {  // its gradient is added to here and reduced after its own backward
      TROUPE_RETURN_IF_ERROR(ready(u));
      state_.prepare_bucket(u);
    }
    const float* in = l == 0 ? batch.inputs : acts_[l - 1].data();
    if (l > 0) din_.resize(acts_[l - 1].size());
    state_.prepare_bucket(l);  // the gradient pages this layer writes, in one call
    Gradients g = grads_of(l);
    TROUPE_RETURN_IF_ERROR(model_.backward_layer_kept(static_cast<int>(l), 0, in, acts_[l].data(), dout_.data(),
                                                      rows, params_of(l), g, l > 0 ? din_.data() : nullptr)
                               .with_context(where(l) + " backward"));
    queue_.submit([this, l, grads] {
      collectives::CollectiveOptions co;
      co.timeout = timeout_;
      co.tag = l;
      return state_.reduce_bucket(l, grads + units_[l].offset, units_[l].count, co)
          .with_context("reduce-scattering the gradients of layer " + std::to_string(l));
    });
    release(l);
    if (l >= 2) gather(l - 2);
    std::swap(dout_, din_);
  }
  TROUPE_RETURN_IF_ERROR(queue_.drain());
  guard.armed = false;
  return *stats;
}

Expected<EvalTotals> LayeredStep::evaluate(const Dataset& data, int64_t first, int64_t last, int64_t most_rows) {
  const int64_t rows = std::max<int64_t>(0, last - first);
  const int64_t features = data.features(), width = data.target_width;
  int64_t widest = features;
  for (const LayerInfo& l : layers_) widest = std::max(widest, l.out_features);
  // Blocks of rows whose widest activation stays within kEvalFloats; every replica runs as many
  // blocks (of its slice, maybe fewer rows) as the largest slice needs, the gathers being collective.
  const int64_t block = std::max<int64_t>(16, kEvalFloats / widest);
  const int64_t blocks = (std::max(most_rows, rows) + block - 1) / block;
  EvalTotals t;
  std::vector<float> in, out;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = std::min(rows, b * block), n_rows = std::min(rows, begin + block) - begin;
    const float* x = data.images.data() + static_cast<size_t>((first + begin) * features);
    int64_t in_width = features;
    for (size_t l = 0; l < layers_.size(); ++l) {
      TROUPE_RETURN_IF_ERROR(state_.gather_unit(l).with_context("evaluation"));
      for (size_t u : owners_[l]) TROUPE_RETURN_IF_ERROR(state_.gather_unit(u).with_context("evaluation"));
      out.resize(static_cast<size_t>(n_rows * layers_[l].out_features));
      const Parameters params = params_of(l);
      // In chunks: a layer's own scratch (a gpt block's attention) grows with the rows it is given.
      for (int64_t at = 0; at < n_rows; at += kEvalRows) {
        const int64_t n = std::min(kEvalRows, n_rows - at);
        TROUPE_RETURN_IF_ERROR(model_.forward_layer(static_cast<int>(l), x + at * in_width, n, params,
                                                    out.data() + at * layers_[l].out_features)
                                   .with_context("evaluating layer " + std::to_string(l)));
      }
      state_.release_unit(l);
      for (size_t u : owners_[l]) state_.release_unit(u);
      in.swap(out);
      x = in.data();
      in_width = layers_[l].out_features;
    }
    for (int64_t at = 0; at < n_rows; at += kEvalRows) {
      const int64_t n = std::min(kEvalRows, n_rows - at);
      auto s = layer_loss(model_, x + at * in_width, TargetRows::of(data).from(first + begin + at, width), n, nullptr);
      if (!s.ok())
        return s.status().with_context("evaluating rows " + std::to_string(first + begin + at) + " of the test set");
      if (s->correct < 0) t.counted = false;
      t.correct += s->correct;
      t.loss_sum += static_cast<double>(s->loss) * static_cast<double>(n);
      t.rows += n;
    }
  }
  if (!t.counted) t.correct = -1;
  return t;
}

}  // namespace troupe
