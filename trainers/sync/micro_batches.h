// Gradient accumulation (--accumulate K): a step's batch computed as K equal micro-batches, one
// forward_backward each, so only a micro-batch's activations are alive at a time. Every training
// loop that takes --accumulate computes a step this way: sync replicas (trainer_driver.h) and the
// CPU parameter-server workers (ps/async_worker.h), whose replays recompute a push the same way.
#pragma once

#include <vector>

#include "core/status.h"
#include "trainers/api/trainer.h"

namespace troupe {

// forward_backward of `batch` split into `parts` consecutive micro-batches: each one's gradients
// are computed into `scratch` (resized to grads.size()) and summed into `grads`, which must hold
// zeros, then divided by `parts`, giving the whole batch's mean gradient up to rounding. A batch
// that `parts` does not divide (the short last batch of an async worker's epoch) is cut into
// min(parts, rows) micro-batches whose sizes differ by at most one row, each weighted by its rows,
// so the result is still the batch's mean. The stats: the mean loss (weighted alike) and the summed
// correct count (-1 when the model does not count). parts == 1 is one call straight into `grads`,
// so its hook sees every ready(); with more, nothing is announced (the micro-batches' gradients
// are partial sums). invalid_argument for parts < 1 or an empty batch; the trainer's errors as they are.
Expected<BatchStats> forward_backward_parts(Trainer& trainer, const Batch& batch, const Parameters& params,
                                            Gradients& grads, int parts, std::vector<float>& scratch);

}  // namespace troupe
