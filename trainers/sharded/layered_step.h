// Stage parameters (`--shard parameters`: ZeRO stage 3, FSDP's FULL_SHARD): one step's forward and
// backward layer by layer through the trainer's LayerModel (Trainer::layers()), each layer's
// parameters all-gathered just before its forward and again before its backward and given back
// right after, its gradients reduce-scattered as soon as its backward is done.
//
//   forward:  gather 0, gather 1 | layer 0 | give back 0, gather 2 | layer 1 | ... | layer L-1 (kept)
//   backward: gather L-2 | back L-1, reduce L-1, give back L-1, gather L-3 | back L-2 ... | back 0
//
// The collectives run on a CommQueue in the order queued (the same on every rank), so the next
// layer's gather overlaps this layer's compute and at most two layers are gathered at once. The
// layers' ranges are the ShardedState's units (layer_units): a rank owns chunk r of each layer.
// A layer that shares an earlier layer's blocks (LayerInfo::shared: a tied head) runs with that
// layer gathered too, and views of the whole model; the earlier layer then stays gathered from its
// forward until its own backward (three layers whole at most) and its gradient pages hold the
// sharer's contribution until it is reduced with its own.
// Activations of every layer are kept from forward to backward (as one process keeps them): the
// layers' outputs here, and what else a layer keeps itself (LayerModel::forward_layer_kept, slot 0).
#pragma once

#include <chrono>
#include <vector>

#include "core/status.h"
#include "trainers/api/trainer.h"
#include "trainers/sync/grad_buckets.h"
#include "trainers/sharded/comm_queue.h"
#include "data/dataset.h"
#include "trainers/sharded/sharded_state.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {

// The layers' flat ranges as units (GradBucket: offset, count, blocks), in layer order.
// invalid_argument when the layers do not cover the `total` floats of the model back to back
// (pipeline::check_layers' conditions, and nothing before the first or after the last).
Expected<std::vector<GradBucket>> layer_units(const std::vector<LayerInfo>& layers, size_t total);

class LayeredStep {
 public:
  // `state` was created over `units` = layer_units(layers) with stage parameters; `model` and
  // `state` outlive this object.
  LayeredStep(LayerModel& model, std::vector<LayerInfo> layers, std::vector<GradBucket> units, ShardedState& state,
              std::chrono::milliseconds timeout);

  // The batch's mean loss and correct count (this replica's rows), its gradients averaged over the
  // replicas into each rank's chunks of state.grads(), scaled by `weight` (an elastic replica's
  // share) and Batch::loss_scale first. Class labels (LayerModel::output_loss) or target values
  // (output_loss_values, when the layers score them). The layers' errors name the layer; a
  // collective's names the unit and the rank it waited for. After an error the queued collectives
  // are dropped.
  Expected<BatchStats> forward_backward(const Batch& batch, float weight);
  double comm_seconds() const { return queue_.busy_seconds(); }  // gathers and reduce-scatters so far

  // Evaluation of rows [first, last) of `data` (this replica's slice; the slices may differ in
  // size, `most_rows` is the largest), layer by layer over blocks of rows whose activations stay
  // within kEvalFloats: each layer gathered once per block and given back, so no more than one
  // layer is whole at a time. Collective: every replica calls it for the same model. The loss
  // summed over rows (mean x rows) and the correct count, as evaluate_rows gives them.
  Expected<EvalTotals> evaluate(const Dataset& data, int64_t first, int64_t last, int64_t most_rows);

 private:
  // Layer l's parameters and gradients: views of its range of the state's flat buffers (of the
  // whole buffers when it shares another layer's blocks).
  Parameters params_of(size_t l) const;
  Gradients grads_of(size_t l) const;
  size_t total() const { return units_.back().offset + units_.back().count; }

  LayerModel& model_;
  std::vector<LayerInfo> layers_;
  ShardedState& state_;
  std::chrono::milliseconds timeout_;
  std::vector<GradBucket> units_;
  std::vector<std::vector<size_t>> owners_;  // per layer: the earlier units whose blocks it shares
  std::vector<bool> pinned_;                 // per unit: shared by a later layer
  CommQueue queue_;
  std::vector<std::vector<float>> acts_;  // acts_[l]: layer l's output
  std::vector<float> dout_, din_;
  static constexpr int64_t kEvalRows = 64;              // rows per layer call when evaluating
  static constexpr int64_t kEvalFloats = int64_t{16} << 20;  // floats of one layer's outputs per block
};

}  // namespace troupe
