#include "models/torch/param_binding.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace troupe::torch_model {

// Runs after autograd's accumulator of one parameter has added this backward's gradient into the
// gradient block: the block is final for the step.
class ParamBinding::ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(const ParamBinding* binding, size_t entry) : binding_(binding), entry_(entry) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    if (binding_->grads_) binding_->grads_->ready(binding_->entries_[entry_].param);
    return outputs;
  }

 private:
  const ParamBinding* binding_;
  size_t entry_;
};

namespace {

std::vector<int64_t> block_shape(const at::Tensor& t) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  if (shape.empty()) shape.push_back(1);  // a scalar parameter: one float
  return shape;
}

at::Tensor view_of(const float* data, const at::Tensor& like) {
  return torch::from_blob(const_cast<float*>(data), like.sizes(), torch::kFloat32);
}

}  // namespace

Status ParamBinding::declare(torch::jit::Module& module, ParameterSpace& space, const std::string& what) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) named.emplace_back(p.name, p.value);
  return declare(named, space, what);
}

Status ParamBinding::declare(const std::vector<std::pair<std::string, at::Tensor>>& named_list, ParameterSpace& space,
                             const std::string& what) {
  for (const auto& [name, t] : named_list) {
    if (t.scalar_type() != torch::kFloat32)
      return invalid_argument(what + ": parameter '" + name + "' is " + std::string(c10::toString(t.scalar_type())) +
                              "; troupe trains f32 parameters (call .float() on the module before saving it)");
    if (!t.requires_grad()) continue;  // frozen: not trained, stays the module's
    const at::Tensor values = t.detach().contiguous();
    std::vector<float> start(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
    const Param p = space.declare(name, block_shape(t), std::move(start));
    if (!space.status().ok()) return space.status();
    auto accumulator = torch::autograd::impl::grad_accumulator(t);
    if (!accumulator)
      return internal_error(what + ": parameter '" + name + "' has no gradient accumulator (is it a leaf?)");
    accumulator->add_post_hook(std::make_unique<ReadyHook>(this, entries_.size()));
    entries_.push_back(Entry{name, t, p, std::move(accumulator)});
  }
  if (entries_.empty()) return invalid_argument(what + " has no trainable parameters");
  return {};
}

void ParamBinding::bind_range(size_t first, size_t end, const Parameters& params, const Gradients* grads) {
  for (size_t i = first; i < end; ++i) {
    Entry& e = entries_[i];
    const float* data = params[e.param];
    if (e.tensor.data_ptr<float>() != data) e.tensor.set_data(view_of(data, e.tensor));
    if (!grads) continue;
    const float* g = (*grads)[e.param];
    if (!e.tensor.grad().defined() || e.tensor.grad().data_ptr<float>() != g) e.tensor.mutable_grad() = view_of(g, e.tensor);
  }
  grads_ = grads;
}

int64_t ParamBinding::numel() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += e.tensor.numel();
  return n;
}

}  // namespace troupe::torch_model
