#include "trainers/optim/loss_scale.h"

#include <string>

namespace troupe {

Expected<bool> LossScaler::update(bool finite) {
  const LossScaleStep step = loss_scale_step(o_, finite, &s_);
  if (step == LossScaleStep::give_up) return loss_scale_gave_up(s_.bad_in_a_row, s_.scale);
  return step == LossScaleStep::apply;
}

Status loss_scale_gave_up(int64_t in_a_row, float scale) {
  return numeric_error("f16 gradients overflowed in " + std::to_string(in_a_row) + " steps in a row (loss scale now " +
                       std::to_string(scale) +
                       "); the model diverged or its gradients do not fit f16: use --precision bf16 or a lower --lr (or "
                       "allow more overflows in a row: --loss-scale-max-skips)");
}

}  // namespace troupe
