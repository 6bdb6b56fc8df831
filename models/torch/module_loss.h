// The loss a torch module is trained on: its own `loss(output, target)` method when it has one,
// else cross-entropy for class targets or mean squared error for value targets — for the whole model's
// step (torchscript_trainer.cc, module_trainer.h) and for the last layer of a pipeline
// (sequential_layers.h) alike.
#pragma once

#include <torch/script.h>

#include <functional>
#include <string>

#include "core/status.h"

namespace troupe::torch_model {

struct LossSpec {
  int classes = 0;    // > 0: class targets (labels); 0: value targets
  int64_t width = 1;  // labels or values per example
  std::string what;   // names the module in errors
  // The module's own loss(output, target), when it has one.
  using Own = std::function<at::Tensor(const at::Tensor& out, const at::Tensor& target)>;
  Own own;
};

// The rows' targets as a tensor: labels as int64 [rows] (or [rows * width] for sequences), values as
// f32 [rows, width]; views of the batch's memory where the type allows.
at::Tensor target_tensor(const LossSpec& spec, const int32_t* labels, const float* targets, int64_t rows);

// The mean loss of `out` for `target` into `loss` (a tensor to back-propagate); an error naming the
// module when `out` does not fit the targets.
Status mean_loss(const LossSpec& spec, const at::Tensor& out, const at::Tensor& target, int64_t rows, at::Tensor* loss);

// How many of the rows `out` classifies right (-1 where it does not classify one label per row).
int64_t correct_count(const LossSpec& spec, const at::Tensor& out, const at::Tensor& target);

std::string shape_text(const at::Tensor& t);

}  // namespace troupe::torch_model
