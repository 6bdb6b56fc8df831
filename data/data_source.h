// The examples a job trains and evaluates on, as the trainers take them (data/readers/fashion_mnist.h
// Dataset: flat f32 inputs and an int32 class): the built-in Fashion-MNIST, or the user's own data
// (DataOptions::data, opened by data/dataset_spec.h).
//
// From a dataset's fields: the target (--target, else the one field named label, labels, y, target
// or class) must hold one integer per example, classes 0..K-1 (K = the largest label + 1 over both
// sets, or the number of text labels); the inputs (--inputs, else every other field) are flattened
// and concatenated per example, u8 scaled to [0, 1] (x / 255, as the built-in dataset), any other
// type converted to f32. An input field of per-example shape [H, W], [H, W, 1] or [1, H, W] keeps
// its rows and columns (the cnn's image); otherwise an example is one row of all its values.
// With `stream` (--stream) the inputs stay in the files and are converted as batches are cut
// (data/feed/streamed_inputs.h); the evaluation set is read whole either way.
// With --loss mse the target holds values (f32, any per-example shape): regression. With --seq-len
// the data is a token stream cut into language-model windows (data/token_windows.h).
// Evaluation: --val SPEC's training split, else the dataset's split "val" (or "test"), else a
// seeded, stratified --val-fraction of the training split.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "data/table.h"
#include "data/readers/fashion_mnist.h"
#include "data/data_options.h"

namespace troupe {

struct TrainData {
  std::shared_ptr<const Dataset> train, test;
  std::string description;  // "x_train.npy + y_train.npy: inputs x (u8[28,28]), target y, 10 classes; ..."
};

// Loads what `o` names: --data when set, else the built-in dataset from `dataset_dir` (through the
// process's cache: data/dataset_cache.h).
Expected<TrainData> load_train_data(const DataOptions& o);

// One table's examples as a Dataset (the fields chosen as above; `classes` 0: from the labels).
// With `values` the target is read as f32 values of any per-example shape (--loss mse: regression).
Expected<Dataset> to_dataset(const data::Table& table, const std::vector<std::string>& inputs,
                             const std::string& target, int classes, const std::string& where, bool values = false,
                             bool stream = false);

}  // namespace troupe
