// The examples a training loop is fed, in memory: every example's inputs as one f32 row (the input
// fields flattened and concatenated) and its target, either classes (labels: one class, or a token
// window's next tokens) or values (targets: regression). The schema names the fields as the
// trainer sees them (Batch::field). Built by data/data_source.h (the user's data, token
// windows) or data/readers/fashion_mnist.h (the built-in dataset).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/schema.h"

namespace troupe {

class StreamedInputs;  // data/feed/streamed_inputs.h

struct Dataset {
  int64_t count = 0;            // examples
  int rows = 0, cols = 0;       // an image's sides (1 x features when the inputs are not an image)
  int classes = 10;             // 0: the target holds values (regression)
  int64_t target_width = 1;     // labels (or target values) per example
  std::vector<float> images;    // count * features inputs, row-major (u8 data scaled to [0, 1]); empty when streamed
  // --stream: the inputs are read from the files example by example as batches are cut
  // (copy_example); labels and targets stay in memory, except a token stream's windows, whose
  // targets are read from the files too (StreamedInputs::holds_targets; labels then empty).
  std::shared_ptr<const StreamedInputs> stream;
  // --normalize: the statistics the inputs were normalised by, as JSON (data/normalization.h);
  // "" when they were not.
  std::string normalization;
  std::vector<int32_t> labels;  // count * target_width labels in [0, classes), when classes > 0
  std::vector<float> targets;   // count * target_width values, when classes == 0
  // The fields as fed (inputs in order, then the target); empty: an image "image" f32[rows, cols]
  // (u8 in the files) and a class "label", the built-in dataset's.
  std::vector<FieldSpec> schema;

  int64_t features() const { return static_cast<int64_t>(rows) * cols; }
  bool classifies() const { return classes > 0; }
  // One class per example: what stratified shard plans and accuracy need.
  bool one_class_per_example() const;
  // The labels when one class per example (for stratified shard plans), else empty.
  const std::vector<int32_t>& class_labels() const;
  // What trainers are set up with (TrainerContext::data).
  DataSpec spec() const;
};

// Example `idx`'s inputs into x[0, features), its labels into y[0, target_width) when the dataset
// classifies, else its values into t[0, target_width).
void copy_example(const Dataset& d, int64_t idx, float* x, int32_t* y, float* t);

// Rows `keep` of `d`, in that order (the same schema; a streamed dataset gives a streamed view).
Dataset select_rows(const Dataset& d, const std::vector<int64_t>& keep);

// `d` with its inputs in memory (a streamed dataset read whole: an evaluation set).
Dataset materialize(const Dataset& d);

// ok, or invalid_argument saying `what` needs the training set in memory (not --stream).
Status require_in_memory(const Dataset& d, const std::string& what);

// A seeded split into (training, validation): from each class (stratified; one group when the
// target is not one class per example), round(fraction x its examples) go to validation.
std::pair<Dataset, Dataset> split_fraction(const Dataset& d, double fraction, uint64_t seed);

// The fields of batches cut from a dataset: bind() points a Batch's fields at its inputs and its
// labels or targets (each field a view with the batch's row stride). Hold one per feed: the views
// live here until the next bind().
class BatchFields {
 public:
  // The views' names point into `spec`, which must outlive them.
  void bind(const DataSpec& spec, Batch* b);
  // The same with a copy of `spec` kept here (for a spec made on the spot: Dataset::spec()).
  void bind_copy(const DataSpec& spec, Batch* b) {
    owned_ = spec;
    bind(owned_, b);
  }

 private:
  std::vector<FieldView> views_;
  DataSpec owned_;
};

// Rows [first, first + rows) of `b` (a micro-batch): its inputs, target and fields (views kept in
// *views) moved to the first row.
Batch batch_rows(const Batch& b, int64_t first, int64_t rows, std::vector<FieldView>* views);

// A refusal for loops that train one class per example only (the parameter-server workers,
// pipelines, the GPU): ok when `d` describes such a dataset, else invalid_argument saying which strategy
// does not take it and which does.
Status require_one_class(const DataSpec& d, const std::string& what);

}  // namespace troupe
