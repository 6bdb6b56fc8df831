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
  Named params, buffers;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) params.emplace_back(p.name, p.value);
  for (const auto& b : module.named_buffers(/*recurse=*/true)) buffers.emplace_back(b.name, b.value);
  return declare(params, buffers, space, what);
}

Status ParamBinding::declare(const Named& named_list, const Named& buffers, ParameterSpace& space,
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
  return declare_buffers(buffers, space, what);
}

// After the parameters, in the module's order, under their state_dict names: f32 values of any
// floating or integer buffer (a count is exact up to 2^24).
Status ParamBinding::declare_buffers(const Named& buffers, ParameterSpace& space, const std::string& what) {
  for (const auto& [name, t] : buffers) {
    if (!t.defined() || t.numel() == 0) continue;
    if (t.is_complex() || t.scalar_type() == torch::kBool)
      return invalid_argument(what + ": buffer '" + name + "' is " + std::string(c10::toString(t.scalar_type())) +
                              "; troupe keeps floating and integer buffers as model state");
    const at::Tensor values = t.detach().to(torch::kFloat32).contiguous();
    std::vector<float> start(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
    const Param p = space.declare_state(name, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                                        std::move(start));  // a scalar stays [], as PyTorch loads it
    if (!space.status().ok()) return space.status();
    state_.push_back(StateEntry{t, p});
  }
  return {};
}

void ParamBinding::load_state(const Parameters& params) {
  torch::NoGradGuard no_grad;
  for (StateEntry& e : state_) e.tensor.copy_(view_of(params[e.param], e.tensor));
}

void ParamBinding::store_changes(const Parameters& params, Gradients& grads, float scale) {
  torch::NoGradGuard no_grad;
  for (StateEntry& e : state_) {
    at::Tensor change = e.tensor.to(torch::kFloat32) - view_of(params[e.param], e.tensor);
    if (scale != 1.0f) change.mul_(scale);
    view_of(grads[e.param], e.tensor).add_(change);
    grads.ready(e.param);
  }
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
