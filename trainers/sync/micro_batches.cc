#include "trainers/sync/micro_batches.h"

#include <algorithm>
#include <string>

#include "kernels/cpu/ops.h"
#include "data/dataset.h"

namespace troupe {

Expected<BatchStats> forward_backward_parts(Trainer& trainer, const Batch& batch, const Parameters& params,
                                            Gradients& grads, int parts, std::vector<float>& scratch) {
  if (parts < 1) return invalid_argument("--accumulate " + std::to_string(parts) + " micro-batches");
  if (parts == 1) return trainer.forward_backward(batch, params, grads);
  if (batch.size < 1) return invalid_argument("an empty batch has no micro-batches");
  // A short batch (an epoch's last, in async jobs) may not divide: then as many parts as it has
  // rows, at most `parts`, the first `extra` of them a row longer, each weighted by its rows.
  const int64_t n = std::min<int64_t>(parts, batch.size);
  const int64_t base = batch.size / n, extra = batch.size % n;
  scratch.resize(grads.size());
  Gradients part_grads(scratch.data(), scratch.size(), nullptr, grads.first());
  BatchStats sum{0.0f, 0};
  std::vector<FieldView> views;
  int64_t at = 0;
  for (int64_t m = 0; m < n; ++m) {
    const int64_t rows = base + (m < extra ? 1 : 0);
    const Batch micro = batch_rows(batch, at, rows, &views);
    at += rows;
    std::fill(scratch.begin(), scratch.end(), 0.0f);  // the API promises zeroed gradients
    auto part = trainer.forward_backward(micro, params, part_grads);
    if (!part.ok()) return part.status();
    if (extra != 0) kernels::cpu::scale(scratch.data(), scratch.size(), static_cast<float>(rows) * n / batch.size);
    kernels::cpu::sum_into(grads.data(), scratch.data(), scratch.size());
    sum.loss += extra == 0 ? part->loss / static_cast<float>(n)
                           : part->loss * (static_cast<float>(rows) / static_cast<float>(batch.size));
    sum.correct = (sum.correct < 0 || part->correct < 0) ? -1 : sum.correct + part->correct;
  }
  kernels::cpu::scale(grads.data(), grads.size(), 1.0f / static_cast<float>(n));
  return sum;
}

}  // namespace troupe
