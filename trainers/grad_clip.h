// Gradient clipping by the global norm (`--clip-grad-norm`): the whole model's gradient, one
// vector, scaled down to `max_norm` when its L2 norm exceeds it (direction kept). Called after the
// gradients are complete — in a sync job after the all-reduce, on the averaged gradient, which is
// the same on every replica, so every replica clips alike and the norm is the global one.
#pragma once

#include <cstddef>

namespace troupe {

// Returns the norm before clipping (summed in double, in index order: the same bits for the same
// gradient). max_norm <= 0 leaves the gradient alone.
double clip_grad_norm(float* grads, size_t n, float max_norm);

}  // namespace troupe
