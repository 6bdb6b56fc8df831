#include "trainers/micro_batches.h"

#include <algorithm>
#include <string>

#include "kernels/cpu/ops.h"

namespace troupe {

Expected<BatchStats> forward_backward_parts(Trainer& trainer, const Batch& batch, const Parameters& params,
                                            Gradients& grads, int parts, std::vector<float>& scratch) {
  if (parts == 1) return trainer.forward_backward(batch, params, grads);
  if (parts < 1 || batch.size % parts != 0)
    return invalid_argument("a batch of " + std::to_string(batch.size) + " rows does not split into " +
                            std::to_string(parts) + " equal micro-batches");
  const int64_t rows = batch.size / parts;
  scratch.resize(grads.size());
  Gradients part_grads(scratch.data(), scratch.size(), nullptr, grads.first());
  BatchStats sum{0.0f, 0};
  for (int m = 0; m < parts; ++m) {
    const size_t at = static_cast<size_t>(m) * static_cast<size_t>(rows);
    const Batch micro{batch.inputs + at * static_cast<size_t>(batch.features), batch.labels + at, rows, batch.features,
                      batch.loss_scale};
    std::fill(scratch.begin(), scratch.end(), 0.0f);  // the API promises zeroed gradients
    auto part = trainer.forward_backward(micro, params, part_grads);
    if (!part.ok()) return part.status();
    kernels::cpu::sum_into(grads.data(), scratch.data(), scratch.size());
    sum.loss += part->loss / static_cast<float>(parts);
    sum.correct = (sum.correct < 0 || part->correct < 0) ? -1 : sum.correct + part->correct;
  }
  kernels::cpu::scale(grads.data(), grads.size(), 1.0f / static_cast<float>(parts));
  return sum;
}

}  // namespace troupe
