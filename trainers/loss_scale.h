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
// a resumed job starts again at `initial` (a few skipped steps while it settles).
#pragma once

#include <cstdint>

#include "core/status.h"

namespace troupe {

struct LossScaleOptions {
  float initial = 65536.0f;  // 2^16
  float growth = 2.0f;
  float backoff = 0.5f;
  int64_t interval = 2000;   // finite steps in a row before S grows
  float min = 1.0f;
  float max = 16777216.0f;   // 2^24
  // Overflowing steps in a row after which training stops with an error (at S = min nothing more
  // can be done: the model diverged or f16 cannot hold its gradients).
  int64_t max_skipped_in_a_row = 100;
};

class LossScaler {
 public:
  explicit LossScaler(LossScaleOptions o = {}) : o_(o), scale_(o.initial) {}

  float scale() const { return scale_; }
  int64_t skipped() const { return skipped_; }  // steps skipped so far

  // After a step's gradients: true when they were finite and the step should be applied (after
  // dividing the gradients by the scale() they were computed with). numeric_error when
  // max_skipped_in_a_row overflowing steps came in a row.
  Expected<bool> update(bool finite);

 private:
  LossScaleOptions o_;
  float scale_;
  int64_t good_in_a_row_ = 0;
  int64_t bad_in_a_row_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace troupe
