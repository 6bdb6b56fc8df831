// What every training loop (CPU, GPU, and later each replica) reports the same way: the running
// tally of an epoch, progress events, epoch statistics, the final result, and the error for a loss
// that stopped being finite. One place, so the trainers cannot drift apart.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "core/status.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// The running sums of one epoch's steps.
// Seconds from `t0` to now on the steady clock (epoch and job timings).
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct EpochTally {
  double loss_sum = 0;   // of the steps' mean losses, each weighted by its examples when they are given
  int64_t correct = 0;
  int64_t steps = 0;
  int64_t examples = 0;  // 0: every step a whole batch (the loop did not say)
  // A step's mean loss and correct count; `step_examples` > 0: the examples it trained (a padded
  // last step has fewer), so the epoch's mean loss, accuracy and samples/s count them.
  void add(float loss, int64_t step_correct, int64_t step_examples = 0) {
    loss_sum += step_examples > 0 ? static_cast<double>(loss) * step_examples : loss;
    correct += step_correct;
    examples += step_examples;
    ++steps;
  }
  double mean_loss() const {
    return examples > 0 ? loss_sum / examples : loss_sum / static_cast<double>(std::max<int64_t>(steps, 1));
  }
  int64_t examples_or(int batch_size) const { return examples > 0 ? examples : steps * batch_size; }
};

// A mid-epoch progress event after `tally.steps` steps of epoch `epoch` took `epoch_seconds`;
// `steps_left` counts the job's remaining steps, for the ETA.
TrainProgress step_progress(const TrainOptions& o, int epoch, int64_t steps_per_epoch, const EpochTally& tally,
                            double epoch_seconds, int64_t steps_left);

// The statistics of a finished epoch; test_accuracy stays -1 for the caller to fill in.
EpochStats epoch_stats(int epoch, const EpochTally& tally, int batch_size, double seconds);

// Logs a finished epoch, appends it to `result`'s history and sends the epoch_done progress event.
void report_epoch(const EpochStats& stats, const TrainOptions& o, int64_t steps_per_epoch, TrainResult* result,
                  const ProgressFn& progress);

// Fills the totals of `result` from its history: epochs, steps, final loss and accuracy, and
// training samples/s over `train_seconds`.
void finish_result(TrainResult* result, int64_t steps, int batch_size, double train_seconds);

// numeric_error for a loss that is NaN or infinite at `step_in_epoch` (1-based) of epoch `epoch`.
Status nonfinite_loss(float loss, int epoch, int64_t step_in_epoch, int64_t steps_per_epoch, int64_t global_step,
                      float lr);

}  // namespace troupe
