// Gradient clipping by the global norm (`--clip-grad-norm`): the whole model's gradient, one
// vector, scaled down to `max_norm` when its L2 norm exceeds it (direction kept). Called after the
// gradients are complete — in a sync job after the all-reduce, on the averaged gradient, which is
// the same on every replica, so every replica clips alike and the norm is the global one.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace troupe {

// Returns the norm before clipping (summed in double, in index order: the same bits for the same
// gradient). max_norm <= 0 leaves the gradient alone.
double clip_grad_norm(float* grads, size_t n, float max_norm);

// The pieces, for gradients that live in parts (a sharded replica's chunks, a pipeline's stages):
// the sum of squares of one part (double, index order), and the factor every part is scaled by
// once the parts' sums give the whole norm (1: no clipping, when max_norm <= 0 or norm <= max_norm).
double squared_norm(const float* grads, size_t n);
float clip_factor(double norm, float max_norm);

// The same leaving out `skip`, sorted disjoint ranges [first, second) of grads[0, n): the model's
// state blocks (ParameterSpace::declare_state), whose slots carry changes, not gradients — they
// count in no norm and are never scaled. An empty `skip` is the functions above.
using FlatRanges = std::vector<std::pair<size_t, size_t>>;
double clip_grad_norm(float* grads, size_t n, float max_norm, const FlatRanges& skip);
double squared_norm(const float* grads, size_t n, const FlatRanges& skip);
void scale_except(float* grads, size_t n, float factor, const FlatRanges& skip);

}  // namespace troupe
