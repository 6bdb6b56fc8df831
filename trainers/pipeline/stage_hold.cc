#include "trainers/pipeline/stage_hold.h"

#include <utility>

namespace troupe::pipeline {

checkpoint::TrainingState StageHold::take(int64_t step) {
  checkpoint::TrainingState out = step == newest.step                 ? std::move(newest)
                                  : before && step == before->step    ? std::move(*before)
                                  : own.holds(step)                   ? own.state(step)
                                                                      : std::move(newest);
  held = false;
  newest = checkpoint::TrainingState{};
  before.reset();
  own = MirroredStage{};
  return out;
}

}  // namespace troupe::pipeline
