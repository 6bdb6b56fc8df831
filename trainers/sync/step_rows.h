// How a sync replica's steps are made up: the rows of the global batch this replica trains (the
// even split, or an elastic replica's Replica::local_rows), the weight of its gradient relative to
// an even share, and the epoch's short last step under --last-batch pad, where each replica is
// weighted by the rows it has (one with none trains a zero-weight padding row: padding_row.h).
// Pure arithmetic on the options: the replica's loop (trainer_driver.cc) asks it at every step.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "trainers/setup/train_options.h"

namespace troupe {

struct StepRows {
  int world = 1;
  int64_t global_batch = 0;   // --batch-size
  int local_batch = 0;        // this replica's rows of a whole step
  float weight = 1.0f;        // its share relative to an even one (1 unless elastic and uneven)
  int64_t steps_per_epoch = 0;
  int64_t last_rows = 0;      // the global rows of the epoch's last step
  bool short_last = false;    // the epoch ends in a short (padded) step
  int64_t total_steps = 0;    // of the whole run (--max-steps, else every epoch's steps)

  // Step s (0-based in its epoch) is the epoch's short last step.
  bool short_step(int64_t s) const { return short_last && s == steps_per_epoch - 1; }
  // Step s is the one before the short step: a row of it is kept for a replica that gets none.
  bool keeps_padding(int64_t s) const { return short_last && s == steps_per_epoch - 2; }
  // This replica's weight at step s with `rows` rows: `weight`, or at the short last step its rows x
  // replicas / the step's rows (0 for a padding row).
  float weight_at(int64_t s, int64_t rows) const;
  // The examples step s trains over every replica (the epoch's tally counts them).
  int64_t examples_at(int64_t s) const { return short_step(s) ? last_rows : global_batch; }
  // What the feed gave for step s of `epoch` (`more`: a batch of `rows`; else its end): true to
  // train it; false when the epoch ends here (a lone replica's feed ran out: the trainer's own
  // epoch); internal_error when the batch has not this replica's rows, or a replica of several ran
  // out before the epoch's last step (the others would wait for it in the next all-reduce).
  Expected<bool> accept(bool more, int64_t rows, int64_t s, int epoch) const;
};

// The steps of `o` over `examples` training examples for replica of `world` with `local_rows`
// rows (0: the even split). invalid_argument when an elastic replica's rows exceed the batch or do
// not divide into --accumulate micro-batches, when the global batch does not divide among the
// replicas (and micro-batches), or when it is larger than the training examples.
Expected<StepRows> plan_step_rows(const TrainOptions& o, int64_t examples, int local_rows, int world);

}  // namespace troupe
