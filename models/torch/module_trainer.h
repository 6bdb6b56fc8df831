// A libtorch module written in C++ as a troupe trainer (docs/torch.md, examples/torch_model/):
//
//   struct Net : torch::nn::Module {
//     explicit Net(const troupe::TrainerContext& ctx)
//         : fc(register_module("fc", torch::nn::Linear(ctx.data.features, ctx.data.classes))) {}
//     torch::Tensor forward(torch::Tensor x) { return fc(x); }
//     torch::nn::Linear fc;
//   };
//   TROUPE_REGISTER_TORCH_MODULE("net", Net);
//
// Built as a library against the installed troupe and a libtorch (find_package(troupe),
// find_package(Torch); link troupe::torch_module and ${TORCH_LIBRARIES}) and trained with
// `troupe train|submit --lib libnet.so --model net`. The module is made in setup() — from the
// TrainerContext when it has such a constructor — after libtorch was seeded with the job's seed, so
// every replica starts from the same initialisation, which becomes troupe's parameters (views, as for
// the torchscript model). Each training forward draws (dropout) from the job's seed and the batch
// (batch_randomness.h). forward(x) gets the batch shaped [B, ...input_shape] and returns the scores
// or values; a `loss(output, target)` member is used as the loss when the module has one.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "models/torch/guarded.h"
#include "models/torch/module_steps.h"
#include "trainers/api/trainer.h"

// The libtorch a library was compiled against; a library running with another one is refused.
#ifndef TROUPE_TORCH_COMPILED_VERSION
#define TROUPE_TORCH_COMPILED_VERSION TORCH_VERSION
#endif

namespace troupe::torch_model {

// The version of the libtorch this process runs ("1.13.0"), from its build settings.
std::string running_libtorch_version();

// An error when the libtorch running is not the major.minor `compiled` names.
Status check_libtorch(const std::string& compiled, const std::string& what);

template <class M, class = void>
struct has_own_loss : std::false_type {};
template <class M>
struct has_own_loss<M, std::void_t<decltype(std::declval<M&>().loss(std::declval<at::Tensor>(),
                                                                    std::declval<at::Tensor>()))>> : std::true_type {};

template <class M>
class ModuleTrainer final : public ModuleSteps {
 public:
  explicit ModuleTrainer(std::string name) : name_(std::move(name)) {}

  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    TROUPE_RETURN_IF_ERROR(check_libtorch(TROUPE_TORCH_COMPILED_VERSION, what()));
    TROUPE_RETURN_IF_ERROR(set_threads(ctx));
    TROUPE_RETURN_IF_ERROR(guarded(what() + ", constructing it", [&]() -> Status {
      // libtorch's generator is the process's: replicas set up side by side in one process (a node
      // hosting two workers) must not interleave their seeding and initial draws.
      std::lock_guard<std::mutex> lock(generator_lock());
      torch::manual_seed(ctx.seed);
      if constexpr (std::is_constructible_v<M, const TrainerContext&>) module_ = std::make_shared<M>(ctx);
      else module_ = std::make_shared<M>();
      return {};
    }));
    LossSpec::Own own;
    if constexpr (has_own_loss<M>::value) own = [this](const at::Tensor& out, const at::Tensor& target) {
      return module_->loss(out, target);
    };
    TROUPE_RETURN_IF_ERROR(set_shapes(ctx, std::move(own)));
    rng_.set_seed(ctx.seed);
    ParamBinding::Named params, buffers;
    for (const auto& p : module_->named_parameters(/*recurse=*/true)) params.emplace_back(p.key(), p.value());
    for (const auto& b : module_->named_buffers(/*recurse=*/true)) buffers.emplace_back(b.key(), b.value());
    return params_.declare(params, buffers, space, what());
  }

  std::string describe() const override {
    return "libtorch module (" + std::to_string(params_.numel()) + " parameters in " +
           std::to_string(params_.count()) + " tensors" +
           (params_.buffers() ? ", " + std::to_string(params_.buffers()) + " buffers" : "") + ")";
  }

 protected:
  at::Tensor run(const at::Tensor& x) override { return module_->forward(x); }
  void set_training(bool on) override { module_->train(on); }
  std::string what() const override { return "libtorch module " + name_; }

 private:
  std::string name_;
  std::shared_ptr<M> module_;
};

}  // namespace troupe::torch_model

// Registers the torch::nn::Module `Module` as the trainer `name` (`--model name` with `--lib`).
#define TROUPE_REGISTER_TORCH_MODULE(name, Module)                                                           \
  static const ::troupe::TrainerRegistrar TROUPE_TRAINER_CONCAT(troupe_torch_registrar_, __LINE__)(       \
      name, []() -> std::unique_ptr<::troupe::Trainer> {                                                 \
        return std::unique_ptr<::troupe::Trainer>(new ::troupe::torch_model::ModuleTrainer<Module>(name)); \
      })
