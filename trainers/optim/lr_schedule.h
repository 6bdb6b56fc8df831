// Learning-rate schedules, as a pure function of the step so every trainer (CPU, GPU, and later each
// replica of a distributed job) computes the same rate without sharing state.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace troupe {

enum class LrSchedule { constant, cosine };

// Parses "constant" or "cosine"; false otherwise.
inline bool parse_lr_schedule(const std::string& text, LrSchedule* out) {
  if (text == "constant") *out = LrSchedule::constant;
  else if (text == "cosine") *out = LrSchedule::cosine;
  else return false;
  return true;
}

// The rate for step `step` (0-based) of `total_steps`: during the first `warmup_steps` a linear ramp
// from base / warmup_steps up to `base` (large global batches diverge when started at full rate);
// then constant, or cosine decay from `base` to 0 over the rest of the job (half a cosine period:
// lr = base * (1 + cos(pi * t)) / 2, t running from 0 to 1 after the warm-up).
inline float scheduled_lr(LrSchedule schedule, float base, int64_t step, int64_t total_steps,
                          int64_t warmup_steps = 0) {
  if (step < warmup_steps) return static_cast<float>(base * (static_cast<double>(step < 0 ? 0 : step) + 1) / warmup_steps);
  const int64_t decay_steps = total_steps - warmup_steps;
  if (schedule == LrSchedule::constant || decay_steps <= 0) return base;
  const int64_t at = step - warmup_steps;
  const double t = static_cast<double>(at > decay_steps ? decay_steps : at) / decay_steps;
  return static_cast<float>(base * 0.5 * (1.0 + std::cos(M_PI * t)));
}

}  // namespace troupe
