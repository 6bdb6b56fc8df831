#include "models/torch/module_loss.h"

#include <torch/torch.h>

namespace troupe::torch_model {

at::Tensor target_tensor(const LossSpec& spec, const int32_t* labels, const float* targets, int64_t rows) {
  if (spec.classes > 0) {
    at::Tensor t = torch::from_blob(const_cast<int32_t*>(labels), {rows * spec.width}, torch::kInt32).to(torch::kLong);
    return spec.width == 1 ? t.reshape({rows}) : t;
  }
  return torch::from_blob(const_cast<float*>(targets), {rows, spec.width}, torch::kFloat32);
}

Status mean_loss(const LossSpec& spec, const at::Tensor& out, const at::Tensor& target, int64_t rows, at::Tensor* loss) {
  if (spec.own) {
    *loss = spec.own(out, target);
  } else if (spec.classes > 0) {
    if (out.dim() != 2 || out.size(0) != rows || out.size(1) != spec.classes)
      return invalid_argument(spec.what + " returned scores of shape " + shape_text(out) + "; [" + std::to_string(rows) +
                              ", " + std::to_string(spec.classes) + "] expected for this data's " +
                              std::to_string(spec.classes) + " classes");
    *loss = torch::nn::functional::cross_entropy(out, target);
  } else {
    if (out.numel() != rows * spec.width)
      return invalid_argument(spec.what + " returned values of shape " + shape_text(out) + "; " +
                              std::to_string(spec.width) + " per example expected");
    *loss = torch::mse_loss(out.reshape({rows, spec.width}), target);
  }
  return {};
}

int64_t correct_count(const LossSpec& spec, const at::Tensor& out, const at::Tensor& target) {
  if (spec.classes <= 0 || spec.width != 1 || out.dim() != 2) return -1;
  return out.argmax(1).eq(target).sum().item<int64_t>();
}

std::string shape_text(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

}  // namespace troupe::torch_model
