#include "trainers/sync/held_state.h"

#include <algorithm>

#include "trainers/sync/replica_state.h"

namespace troupe {

Status hold_state(ReplicaState& state, int64_t step, int epoch, int64_t epoch_step, HeldState* out) {
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
  out->mirror = MirrorHold{};
  out->held = true;
  return {};
}

void hold_mirror(MirrorHold rounds, HeldState* out) {
  out->state = checkpoint::TrainingState{};
  out->state.step = std::max(rounds.newest.step, rounds.older.step);
  out->mirror = std::move(rounds);
  out->held = out->mirror.any();
}

}  // namespace troupe
