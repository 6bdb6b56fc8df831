// `--model torchscript --trainer-arg file=model.pt`: a module saved from Python with
// torch.jit.script or torch.jit.trace, trained by troupe with autograd (docs/torch.md). Its forward
// takes the batch's input shaped [B, ...] as the data says (or as input_shape=C,H,W says) and returns
// the scores [B, classes] or the values [B, width]; the loss is the module's own `loss(output,
// target)` method when it has one, else cross-entropy (classes) or mean squared error (values).
#include <torch/script.h>
#include <torch/torch.h>

#include <memory>
#include <string>

#include "models/torch/guarded.h"
#include "models/torch/module_steps.h"
#include "models/torch/sequential_layers.h"
#include "trainers/api/trainer.h"

namespace troupe {
namespace {

using torch_model::guarded;

class TorchScriptTrainer final : public torch_model::ModuleSteps {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    file_ = ctx.config.get("file");
    // A cluster job's copy of the file from the GCS, where this node does not hold it at file's path.
    local_ = ctx.config.get("file_local", file_);
    if (file_.empty())
      return invalid_argument("--model torchscript needs the module's file: --model torchscript:model.pt or "
                              "--trainer-arg file=model.pt (saved from Python with "
                              "torch.jit.script(module).save(...))");
    TROUPE_RETURN_IF_ERROR(set_threads(ctx));
    rng_.set_seed(ctx.seed);  // dropout and the like: each training forward's draws follow the batch
    TROUPE_RETURN_IF_ERROR(load());
    torch_model::LossSpec::Own own;
    if (module_.find_method("loss")) own = [this](const at::Tensor& out, const at::Tensor& target) {
      return module_.get_method("loss")({out, target}).toTensor();
    };
    TROUPE_RETURN_IF_ERROR(set_shapes(ctx, std::move(own)));
    TROUPE_RETURN_IF_ERROR(params_.declare(module_, space, what()));
    // null: not a chain
    auto layers = torch_model::SequentialLayers::make(module_, params_, input_shape_, loss_, ctx.seed);
    if (!layers.ok()) return layers.status();
    layers_ = std::move(*layers);
    return {};
  }

  // A scripted nn.Sequential's children as layers (pipelines, `--shard parameters`); null otherwise.
  LayerModel* layers() override { return layers_.get(); }

  std::string describe() const override {
    return file_ + " (" + std::to_string(params_.numel()) + " parameters in " + std::to_string(params_.count()) +
           " tensors" + (params_.buffers() ? ", " + std::to_string(params_.buffers()) + " buffers" : "") + ")";
  }

 protected:
  at::Tensor run(const at::Tensor& x) override { return module_.forward({x}).toTensor(); }
  void set_training(bool on) override { on ? module_.train() : module_.eval(); }
  std::string what() const override { return "torchscript module " + file_; }

 private:
  Status load() {
    return guarded(what(), [&]() -> Status {
      try {
        module_ = torch::jit::load(local_);
      } catch (const c10::Error& e) {
        std::string why = e.what_without_backtrace();
        const bool version = why.find("version") != std::string::npos;
        return invalid_argument(
            "cannot load " + file_ + " as TorchScript: " + why.substr(0, why.find('\n')) +
            (version ? " (the file may come from a newer PyTorch than the libtorch " TORCH_VERSION " troupe was "
                       "built with: build troupe with -DTorch_DIR=<a matching PyTorch's share/cmake/Torch>)"
                     : " (save it from Python with torch.jit.script(module).save(path) or torch.jit.trace)"));
      }
      return {};
    });
  }

  std::string file_, local_;
  torch::jit::Module module_;
  std::unique_ptr<torch_model::SequentialLayers> layers_;
};

}  // namespace

TROUPE_REGISTER_TRAINER("torchscript", TorchScriptTrainer);

}  // namespace troupe
