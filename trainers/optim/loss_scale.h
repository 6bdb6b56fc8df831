// Dynamic loss scaling for f16 training (`--precision f16`). f16 keeps 5 exponent bits: gradients
// below 2^-24 round to zero and above 65504 overflow. Multiplying the loss (so every gradient) by a
// scale S moves the small ones into range; the update divides S out. S starts high and adapts:
//
//   a step whose gradients are all finite is applied, and after `interval` such steps in a row S
//   grows by `growth` (up to `max`), probing for headroom;
//   a step with an infinite or NaN gradient is skipped (no update; its batch counts as seen) and
//   S shrinks by `backoff` (down to `min`).
//
// Replicas of a sync job decide on the all-reduced gradients, so they skip the same steps and keep
// the same S. bf16 has f32's exponent range and needs none of this. The scale is not checkpointed:
// a resumed job starts again at `initial` (a few skipped steps while it settles). The rule itself
// is core/loss_scale.h's, which the GPU trainers run on the device (kernels/cuda/loss_scale_ops.h).
#pragma once

#include <cstdint>

#include "core/loss_scale.h"
#include "core/status.h"

namespace troupe {

class LossScaler {
 public:
  explicit LossScaler(LossScaleOptions o = {}) : o_(o), s_(loss_scale_start(o)) {}

  float scale() const { return s_.scale; }
  int64_t skipped() const { return s_.skipped; }  // steps skipped so far

  // After a step's gradients: true when they were finite and the step should be applied (after
  // dividing the gradients by the scale() they were computed with). numeric_error when
  // max_skipped_in_a_row overflowing steps came in a row.
  Expected<bool> update(bool finite);

 private:
  LossScaleOptions o_;
  LossScaleState s_;
};

// The error of a job whose f16 gradients overflowed `in_a_row` steps in a row at scale `scale`.
Status loss_scale_gave_up(int64_t in_a_row, float scale);

}  // namespace troupe
