#include "trainers/pipeline/schedule.h"

#include <algorithm>

namespace troupe::pipeline {

Expected<Schedule> parse_schedule(const std::string& text) {
  if (text == "gpipe") return Schedule::gpipe;
  if (text == "1f1b") return Schedule::one_f_one_b;
  return invalid_argument("--schedule '" + text + "' is not one of gpipe, 1f1b");
}

const char* schedule_name(Schedule s) { return s == Schedule::gpipe ? "gpipe" : "1f1b"; }

std::vector<PipeOp> stage_ops(Schedule schedule, int stage, int stages, int micro) {
  std::vector<PipeOp> ops;
  if (schedule == Schedule::gpipe) {
    for (int m = 0; m < micro; ++m) ops.push_back({true, m});
    for (int m = 0; m < micro; ++m) ops.push_back({false, m});
    return ops;
  }
  const int warmup = std::min(stages - 1 - stage, micro);
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({true, f});
  while (f < micro) {  // steady state: one forward, one backward
    ops.push_back({true, f++});
    ops.push_back({false, b++});
  }
  while (b < micro) ops.push_back({false, b++});  // cool-down
  return ops;
}

int stash_slots(Schedule schedule, int stage, int stages, int micro) {
  return schedule == Schedule::gpipe ? micro : std::min(stages - stage, micro);
}

double gpipe_bubble_estimate(int stages, int micro) {
  return static_cast<double>(stages - 1) / (micro + stages - 1);
}

}  // namespace troupe::pipeline
