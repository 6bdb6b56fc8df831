#include "trainers/report/epoch_report.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <spdlog/spdlog.h>

namespace troupe {

TrainProgress step_progress(const TrainOptions& o, int epoch, int64_t steps_per_epoch, const EpochTally& tally,
                            double epoch_seconds, int64_t steps_left) {
  TrainProgress p;
  p.epoch = epoch;
  p.epochs = o.epochs;
  p.step = tally.steps;
  p.steps_per_epoch = steps_per_epoch;
  p.loss = tally.steps ? tally.mean_loss() : 0;
  if (epoch_seconds > 0 && tally.steps > 0) {
    p.samples_per_second = tally.examples_or(o.batch_size) / epoch_seconds;
    p.eta_seconds = static_cast<double>(steps_left) * epoch_seconds / tally.steps;
  }
  return p;
}

EpochStats epoch_stats(int epoch, const EpochTally& tally, int batch_size, double seconds) {
  EpochStats es;
  es.epoch = epoch;
  es.train_loss = tally.mean_loss();
  const int64_t examples = tally.examples_or(batch_size);
  es.train_accuracy = static_cast<double>(tally.correct) / static_cast<double>(std::max<int64_t>(examples, 1));
  es.seconds = seconds;
  es.samples_per_second = seconds > 0 ? examples / seconds : 0;
  return es;
}

void report_epoch(const EpochStats& es, const TrainOptions& o, int64_t steps_per_epoch, TrainResult* result,
                  const ProgressFn& progress) {
  spdlog::info("epoch {}: loss {:.4f} train acc {:.4f} test acc {:.4f} ({:.0f} samples/s)", es.epoch, es.train_loss,
               es.train_accuracy, es.test_accuracy, es.samples_per_second);
  result->history.push_back(es);
  if (!progress) return;
  TrainProgress p;
  p.epoch = es.epoch;
  p.epochs = o.epochs;
  p.step = steps_per_epoch;
  p.steps_per_epoch = steps_per_epoch;
  p.loss = es.train_loss;
  p.samples_per_second = es.samples_per_second;
  p.epoch_done = true;
  p.last_epoch = es;
  progress(p);
}

void finish_result(TrainResult* result, int64_t steps, int batch_size, double train_seconds) {
  result->epochs = static_cast<int>(result->history.size());
  result->steps = steps;
  if (!result->history.empty()) {
    result->test_accuracy = result->history.back().test_accuracy;
    result->test_loss = result->history.back().test_loss;
    result->final_loss = result->history.back().train_loss;
  }
  result->samples_per_second = train_seconds > 0 ? steps * batch_size / train_seconds : 0;
}

Status nonfinite_loss(float loss, int epoch, int64_t step_in_epoch, int64_t steps_per_epoch, int64_t global_step,
                      float lr) {
  return numeric_error(std::string("training loss is ") + (std::isnan(loss) ? "NaN" : "infinite") + " at epoch " +
                       std::to_string(epoch) + ", step " + std::to_string(step_in_epoch) + " of " +
                       std::to_string(steps_per_epoch) + " (global step " + std::to_string(global_step) +
                       "); training stopped. Lower --lr (" + std::to_string(lr) + ") or check the input data");
}

}  // namespace troupe
