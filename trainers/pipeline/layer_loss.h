// The last layer's loss for the strategies that run a model layer by layer (pipelines, `--shard
// parameters`): class labels through LayerModel::output_loss, target values through
// output_loss_values (ABI 7), whichever the rows carry.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "trainers/api/trainer.h"
#include "data/dataset.h"

namespace troupe {

// Rows' targets: class labels or values (one of them set), `width` per row as the dataset holds them.
struct TargetRows {
  const int32_t* labels = nullptr;
  const float* values = nullptr;
  static TargetRows of(const Batch& b) { return {b.labels, b.targets}; }
  static TargetRows of(const Dataset& d) {
    return {d.classifies() ? d.labels.data() : nullptr, d.classifies() ? nullptr : d.targets.data()};
  }
  // The rows from `first` on.
  TargetRows from(int64_t first, int64_t width) const {
    const auto at = static_cast<size_t>(first * width);
    return {labels ? labels + at : nullptr, values ? values + at : nullptr};
  }
};

// The mean loss of `out` (the last layer's output for `rows` rows) against `targets`, its gradient
// into `dout` when not null.
inline Expected<BatchStats> layer_loss(LayerModel& model, const float* out, const TargetRows& targets, int64_t rows,
                                       float* dout) {
  if (targets.labels) return model.output_loss(out, targets.labels, rows, dout);
  return model.output_loss_values(out, targets.values, rows, dout);
}

}  // namespace troupe
