// The training flags `troupe train` and `troupe submit` share (model, data, optimizer, schedule,
// seed, ...), registered once so the two commands cannot drift apart, and the progress line both
// draw.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/progress_bar.h"
#include "core/config.h"
#include "core/status.h"
#include "trainers/setup/train_options.h"

namespace troupe::cli {

struct TrainFlags {
  TrainOptions options;
  std::string hidden = "256,128";
  std::string precision = "f32";
  std::string save_dtype = "f32";
  std::string lib;
  bool json = false;
  bool no_progress = false;
};

// Adds --model/--trainer, --lib, --trainer-arg, --hidden, --dataset, --dataset-dir, --epochs,
// --batch-size, --optimizer, --lr, --lr-schedule, --lr-scaling, --lr-reference-batch,
// --warmup-steps, --accumulate, --precision, --loss-scale, --momentum, --weight-decay, --seed, --max-steps, --json and
// --no-progress to `cmd`. `batch_help` describes --batch-size.
void add_train_flags(CLI::App* cmd, TrainFlags& f, const std::string& batch_help);

// After parsing: --hidden into the options, --model NAME:FILE expanded (trainers/setup/model_args.h),
// paths made absolute (invalid_argument naming a bad flag).
Status finish_train_flags(TrainFlags& f);

// Draws `p` on `bar`: a bar per epoch with loss, samples/s and ETA, and one line per finished epoch.
void draw_progress(ProgressBar& bar, const TrainProgress& p);

}  // namespace troupe::cli
