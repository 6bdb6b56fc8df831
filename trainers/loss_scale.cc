#include "trainers/loss_scale.h"

#include <algorithm>
#include <string>

namespace troupe {

Expected<bool> LossScaler::update(bool finite) {
  if (finite) {
    bad_in_a_row_ = 0;
    if (++good_in_a_row_ >= o_.interval) {
      scale_ = std::min(o_.max, scale_ * o_.growth);
      good_in_a_row_ = 0;
    }
    return true;
  }
  good_in_a_row_ = 0;
  ++skipped_;
  if (++bad_in_a_row_ >= o_.max_skipped_in_a_row) {
    return numeric_error("f16 gradients overflowed in " + std::to_string(bad_in_a_row_) +
                         " steps in a row (loss scale now " + std::to_string(scale_) +
                         "); the model diverged or its gradients do not fit f16: use --precision bf16 or a lower --lr");
  }
  scale_ = std::max(o_.min, scale_ * o_.backoff);
  return false;
}

}  // namespace troupe
