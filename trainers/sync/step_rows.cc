#include "trainers/sync/step_rows.h"

#include <algorithm>
#include <string>

namespace troupe {

float StepRows::weight_at(int64_t s, int64_t rows) const {
  if (!short_step(s)) return weight;
  return static_cast<float>(static_cast<double>(rows) * world / static_cast<double>(last_rows));
}

Expected<bool> StepRows::accept(bool more, int64_t rows, int64_t s, int epoch) const {
  // --last-batch pad: the epoch's last step holds the remainder, of which this replica may have
  // fewer rows than the others, or none (then a zero-weight copy of a row keeps it in step).
  const bool short_s = short_step(s);
  if (more && (short_s ? rows > local_batch : rows != local_batch)) {
    return internal_error("the data feed gave a batch of " + std::to_string(rows) + " examples; " +
                          "each replica trains " + std::to_string(local_batch) + " per step");
  }
  if (!more && world > 1 && !short_s) {
    return internal_error("the data feed ran out at step " + std::to_string(s + 1) + " of " +
                          std::to_string(steps_per_epoch) + " of epoch " + std::to_string(epoch));
  }
  return more || short_s;
}

Expected<StepRows> plan_step_rows(const TrainOptions& o, int64_t examples, int local_rows, int world) {
  const bool elastic = local_rows > 0;
  if (elastic && (local_rows > o.batch_size || local_rows % o.accumulate != 0)) {
    return invalid_argument("an elastic replica's " + std::to_string(local_rows) + " rows of the global batch " +
                            std::to_string(o.batch_size) + " must be at most the batch, and divide into --accumulate " +
                            std::to_string(o.accumulate) + " micro-batches");
  }
  if (!elastic && o.batch_size % (world * o.accumulate) != 0) {
    const std::string parts = o.accumulate > 1 ? std::to_string(world) + " replicas x " +
                                                     std::to_string(o.accumulate) + " micro-batches"
                                               : std::to_string(world) + " replicas";
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " (the global batch) does not divide "
                            "among " + parts + "; use a multiple of " + std::to_string(world * o.accumulate));
  }
  StepRows r;
  r.world = world;
  r.global_batch = o.batch_size;
  r.local_batch = elastic ? local_rows : static_cast<int>(o.batch_size / world);
  r.weight = elastic ? static_cast<float>(static_cast<double>(r.local_batch) * world / o.batch_size) : 1.0f;
  // Mini-batches are full: the last partial batch of an epoch is dropped (its examples are seen in
  // other epochs, since every epoch has its own permutation), or with --last-batch pad trained in
  // one more, short step, every replica weighted by the rows it has.
  const bool pad = o.pads_last_batch();
  r.steps_per_epoch = epoch_steps(examples, o.batch_size, pad);
  r.last_rows = step_examples(examples, o.batch_size, pad, r.steps_per_epoch - 1);
  r.short_last = r.last_rows < o.batch_size;
  r.total_steps = o.max_steps > 0 ? std::min<int64_t>(o.max_steps, r.steps_per_epoch * o.epochs)
                                  : r.steps_per_epoch * o.epochs;
  if (examples < o.batch_size) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(examples) + " training examples");
  }
  return r;
}

}  // namespace troupe
