// What the data path needs to know of a job: where its examples come from (the built-in dataset or
// --data SPEC, --val), which fields are inputs and target, how token streams become windows
// (--seq-len), normalisation (--normalize), streaming (--stream) and the kind of target the loss
// wants. The training options (trainers/setup/train_options.h) extend these; the data layer reads only
// them (data/data_source.h, data/token_windows.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

struct DataOptions {
  std::string dataset = "fashion-mnist";
  std::string dataset_dir;          // empty: the dataset_dir setting
  // --data SPEC (data/dataset_spec.h) instead of the built-in dataset; the fields a model reads
  // (data/data_source.h): --inputs (empty: every field but the target), --target (empty: the
  // one field named label, labels, y, target, class or cls); evaluation on --val SPEC, else the
  // dataset's val or test split, else a seeded, stratified --val-fraction of the training split.
  std::string data;
  std::string val;
  double val_fraction = 0.1;
  std::vector<std::string> inputs;
  std::string target;
  std::string token_dtype = "u16";  // raw .bin token files
  // Language-model windows (--seq-len T > 0): the token stream cut into windows of T ids, inputs
  // ids[t, t+T) and targets ids[t+1, t+T+1) (data/token_windows.h).
  int64_t seq_len = 0;
  // --normalize: "" (none), "standard" (the training split's mean and std per input field), or a
  // statistics file of `troupe data inspect --stats-out` (data/normalization.h).
  std::string normalize;
  // --stream: the training inputs are read from the files as batches are cut instead of converted
  // into memory first (datasets larger than memory; data/feed/streamed_inputs.h).
  bool stream = false;
  // The loss (--loss): xent (the target is classes) or mse (the target is values: regression).
  std::string loss = "xent";
  uint64_t seed = 1;  // the job's seed: the order of the data, the splits it draws, the parameters' start
};

}  // namespace troupe
