// The rule of dynamic loss scaling (f16 training; trainers/optim/loss_scale.h tells the story): its
// options, its counters and one step of it. The functions compile for the host and the device
// (core/host_device.h), so the CPU trainer and the GPU's loss-scale kernels skip the same steps
// and keep the same scale.
#pragma once

#include <cstdint>

#include "core/host_device.h"

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

struct LossScaleState {
  float scale = 65536.0f;  // S: what the next step's loss gradient is multiplied by
  int64_t good_in_a_row = 0;
  int64_t bad_in_a_row = 0;
  int64_t skipped = 0;  // steps skipped so far
};

// What a step's check decided: apply its update (after dividing the scale out), skip it, or give
// up (max_skipped_in_a_row overflows in a row; the scale is left as it was).
enum class LossScaleStep : int32_t { apply = 0, skip = 1, give_up = 2 };

TROUPE_HD LossScaleState loss_scale_start(const LossScaleOptions& o) {
  LossScaleState s;
  s.scale = o.initial;
  return s;
}

// One step of the rule, for a step whose gradients were all finite or not.
TROUPE_HD LossScaleStep loss_scale_step(const LossScaleOptions& o, bool finite, LossScaleState* s) {
  if (finite) {
    s->bad_in_a_row = 0;
    if (++s->good_in_a_row >= o.interval) {
      const float grown = s->scale * o.growth;
      s->scale = grown < o.max ? grown : o.max;
      s->good_in_a_row = 0;
    }
    return LossScaleStep::apply;
  }
  s->good_in_a_row = 0;
  ++s->skipped;
  if (++s->bad_in_a_row >= o.max_skipped_in_a_row) return LossScaleStep::give_up;
  const float shrunk = s->scale * o.backoff;
  s->scale = shrunk > o.min ? shrunk : o.min;
  return LossScaleStep::skip;
}

}  // namespace troupe
