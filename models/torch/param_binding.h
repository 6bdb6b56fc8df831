// A TorchScript module's parameters as views of troupe's flat buffers: each parameter tensor's data
// is the runtime's parameter block (no copy per step), its .grad() the gradient block that
// backward() accumulates into in place, and a hook on its gradient accumulator announces the block
// ready (Gradients::ready) as soon as autograd has finished it, so the runtime's buckets all-reduce
// while backward goes on — as PyTorch's own DDP does with the same hooks.
//
// The module's buffers (BatchNorm's running_mean, running_var, num_batches_tracked) are state blocks
// of the parameter space (ParameterSpace::declare_state, ABI 9): the module's own tensors, loaded
// from the runtime's values before each forward, and after a training forward the change it made
// to them is handed to the runtime in their gradient slots, which averages it over the replicas.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "trainers/api/trainer.h"

namespace troupe::torch_model {

class ParamBinding {
 public:
  ParamBinding() = default;
  ParamBinding(const ParamBinding&) = delete;
  ParamBinding& operator=(const ParamBinding&) = delete;

  // Declares every parameter of `module` in `space` under its state_dict name, in the module's
  // order, starting from the module's own values (ParameterSpace's given values); hooks each one's
  // gradient accumulator. `what` names the module in errors.
  Status declare(torch::jit::Module& module, ParameterSpace& space, const std::string& what);
  // The same for a module's parameters and buffers given by name, in order (a torch::nn::Module's
  // named_parameters() and named_buffers(), module_trainer.h).
  using Named = std::vector<std::pair<std::string, at::Tensor>>;
  Status declare(const Named& params, const Named& buffers, ParameterSpace& space, const std::string& what);

  // Points the parameters at `params` and, when `grads` is given, their gradients at it (the
  // tensors are rebuilt only where a buffer moved); the hooks announce blocks to `grads` until
  // release() — outside forward_backward nothing is announced.
  void bind(const Parameters& params, const Gradients* grads) { bind_range(0, entries_.size(), params, grads); }
  // bind() for the parameters [first, end) only (a pipeline stage's layer: `params` may hold only its
  // range); the hooks announce to `grads` from then on, as bind's.
  void bind_range(size_t first, size_t end, const Parameters& params, const Gradients* grads);
  void release() { grads_ = nullptr; }

  // The module's buffers set to the runtime's values in `params` (before a forward).
  void load_state(const Parameters& params);
  // After a training forward: each buffer's change from its value in `params`, times `scale` (the
  // batch's loss scale, as gradients carry it), added into its slot of `grads` and announced.
  void store_changes(const Parameters& params, Gradients& grads, float scale);

  size_t count() const { return entries_.size(); }
  const std::string& name(size_t i) const { return entries_[i].name; }  // its state_dict name
  const Param& param(size_t i) const { return entries_[i].param; }
  size_t buffers() const { return state_.size(); }
  int64_t numel() const;

 private:
  struct Entry {
    std::string name;
    at::Tensor tensor;  // the module's parameter
    Param param;
    // Held here: the variable keeps its accumulator weakly, and a new one would have no hook.
    std::shared_ptr<torch::autograd::Node> accumulator;
  };
  class ReadyHook;

  struct StateEntry {
    at::Tensor tensor;  // the module's buffer, of its own dtype (num_batches_tracked: int64)
    Param param;
  };
  Status declare_buffers(const Named& buffers, ParameterSpace& space, const std::string& what);

  std::vector<Entry> entries_;
  std::vector<StateEntry> state_;
  const Gradients* grads_ = nullptr;
};

}  // namespace troupe::torch_model
