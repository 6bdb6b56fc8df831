#include "trainers/pipeline/stage_hold.h"

#include <utility>

namespace troupe::pipeline {

checkpoint::TrainingState StageHold::take(int64_t step) {
  checkpoint::TrainingState out = step == newest.step || !before ? std::move(newest) : std::move(*before);
  held = false;
  newest = checkpoint::TrainingState{};
  before.reset();
  return out;
}

}  // namespace troupe::pipeline
