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

// The rate for step `step` (0-based) of `total_steps`: constant, or cosine decay from `base` to 0
// over the job (half a cosine period: lr = base * (1 + cos(pi * step / total)) / 2).
inline float scheduled_lr(LrSchedule schedule, float base, int64_t step, int64_t total_steps) {
  if (schedule == LrSchedule::constant || total_steps <= 0) return base;
  const double t = static_cast<double>(step < 0 ? 0 : (step > total_steps ? total_steps : step)) / total_steps;
  return static_cast<float>(base * 0.5 * (1.0 + std::cos(M_PI * t)));
}

}  // namespace troupe
