// Trainer settings the runtime knows for some models, in one table, so the CLI, a job's submitter
// and its workers agree on them:
//
//   - the arg that names the file a model is read from (torchscript's `file`):
//       --model torchscript:FILE   is short for   --model torchscript --trainer-arg file=FILE
//     the path made absolute where the flags are read (a job's workers and `troupe export` run in
//     other directories); a cluster job ships the file through the GCS (trainers/job/job_model_file.h);
//   - whether the model sizes threads of its own (libtorch's pool) to the runtime arg `cpus`, which a
//     job's worker then sets to its --cpus-per-worker (TrainOptions::runtime_args). Others are not
//     given it: the built-in models refuse settings they do not know.
#pragma once

#include <string>

#include "core/status.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// The trainer-arg key that names `model`'s file ("file" for "torchscript"), or "" when it has none.
std::string model_file_key(const std::string& model);

// Whether `model` takes the runtime arg cpus=N (its own threads follow the worker's cpus).
bool model_takes_cpus(const std::string& model);

// The path `o`'s model file arg holds ("" when the model has no such arg, or it is not given).
std::string model_file_path(const TrainOptions& o);

// Expands `--model NAME:FILE` into model NAME and the trainer arg KEY=FILE, then makes the model's
// file arg absolute. invalid_argument for NAME:FILE with an empty FILE, a NAME without a file arg
// ("mlp:x"), or a FILE given both ways.
Status expand_model_file(TrainOptions& o);

}  // namespace troupe
