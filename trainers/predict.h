// `troupe predict` in one process: a saved model (trainers/model_file.h) run over a dataset's
// examples, its outputs — logits of a classifier, values of a regression — written as an f32
// .npy of [rows, outputs] in the data's order. The trainer, its settings, the target's shape and
// the input normalisation come from the model file's metadata; the data is read the way its
// training data was (the same input fields, in order). When the data holds the target, a
// classifier's accuracy (or a regression's mean squared error) is reported beside rows/s.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "trainers/train_options.h"

namespace troupe {

struct PredictOptions {
  std::string model;      // the .safetensors file
  std::string data;       // --data SPEC
  std::string split;      // which split of it ("": the only one, else "test")
  std::vector<std::string> inputs;  // overrides the model's (troupe.inputs)
  std::string target;     // overrides the model's (troupe.target)
  std::string token_dtype = "u16";
  std::string out;        // the .npy written
  int64_t batch_size = 1024;
};

struct PredictResult {
  std::string model;       // "mlp 784-256-128-10 (235146 parameters)"
  int64_t rows = 0, outputs = 0;
  double seconds = 0, rows_per_second = 0;
  double accuracy = -1;    // when the data has the classes
  double mse = -1;         // when the data has a regression's values
  std::string note;        // why the outputs were not scored although the data has a target
};

using PredictProgress = std::function<void(int64_t done, int64_t total)>;

Expected<PredictResult> predict_local(const PredictOptions& o, const PredictProgress& progress = {});

}  // namespace troupe
