#include "trainers/sync/held_state.h"

#include "trainers/sync/replica_state.h"

namespace troupe {

Status hold_state(ReplicaState& state, int64_t step, int epoch, int64_t epoch_step, const Status& cause,
                  HeldState* out) {
  if (state.sharded()) return invalid_argument("a sharded replica's state is not whole in memory");
  const size_t n = state.whole_params().size();
  auto params = state.slice_params(0, n);
  if (!params.ok()) return params.status();
  auto optimizer = state.slice_state(0, n);
  if (!optimizer.ok()) return optimizer.status();
  out->state.step = step;
  out->state.epoch = epoch;
  out->state.epoch_step = epoch_step;
  out->state.params = std::move(*params);
  out->state.optimizer = std::move(*optimizer);
  out->state.extras.clear();
  out->cause = cause;
  out->held = true;
  return {};
}

}  // namespace troupe
