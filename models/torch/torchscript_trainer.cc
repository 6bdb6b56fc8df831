// `--model torchscript --trainer-arg file=model.pt`: a module saved from Python with
// torch.jit.script or torch.jit.trace, trained by troupe with autograd (docs/torch.md). Its forward
// takes the batch's input shaped [B, ...] as the data says (or as input_shape=C,H,W says) and returns
// the scores [B, classes] or the values [B, width]; the loss is the module's own `loss(output,
// target)` method when it has one, else cross-entropy (classes) or mean squared error (values).
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "models/torch/param_binding.h"
#include "trainers/api/trainer.h"

namespace troupe {
namespace {

// A failure inside libtorch (a module that raises, shapes that do not fit) as an error naming where.
template <typename F>
auto guarded(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    std::string what = e.what();
    const size_t trace = what.find("\nException raised from");  // libtorch appends its C++ stack
    if (trace != std::string::npos) what.resize(trace);
    return invalid_argument(where + ": " + what);
  }
}

// libtorch takes the inter-op pool's size once per process, before any inter-op work: later calls throw.
void one_interop_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      torch::set_num_interop_threads(1);
    } catch (const std::exception&) {  // the pool was already started (by the host program): keep it
    }
  });
}

class TorchScriptTrainer final : public Trainer {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    file_ = ctx.config.get("file");
    // A cluster job's copy of the file from the GCS, where this node does not hold it at file's path.
    local_ = ctx.config.get("file_local", file_);
    if (file_.empty())
      return invalid_argument("--model torchscript needs the module's file: --model torchscript:model.pt or "
                              "--trainer-arg file=model.pt (saved from Python with "
                              "torch.jit.script(module).save(...))");
    // libtorch's intra-op threads: threads=N, else the cpus the runtime gave this worker (cpus=, a
    // job's --cpus-per-worker), else 1; inter-op work (torch.jit.fork) on the caller's thread.
    auto cpus = ctx.config.get_int("cpus", 1);
    if (!cpus.ok()) return cpus.status();
    auto threads = ctx.config.get_int("threads", std::max<int64_t>(*cpus, 1));
    if (!threads.ok()) return threads.status();
    if (*threads < 1) return invalid_argument("--trainer-arg threads=" + std::to_string(*threads) + " must be >= 1");
    torch::set_num_threads(static_cast<int>(*threads));
    one_interop_thread();
    torch::manual_seed(ctx.seed);  // dropout and the like: the same stream on every replica
    TROUPE_RETURN_IF_ERROR(load());
    TROUPE_RETURN_IF_ERROR(set_shapes(ctx));
    return params_.declare(module_, space, what());
  }

  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& params, Gradients& grads) override {
    params_.bind(params, &grads);
    module_.train();
    auto stats = guarded(what() + ", forward and backward", [&]() -> Expected<BatchStats> {
      const at::Tensor out = forward(batch);
      at::Tensor loss;
      BatchStats s;
      TROUPE_RETURN_IF_ERROR(score(batch, out, &loss, &s));
      (batch.loss_scale == 1.0f ? loss : loss * batch.loss_scale).backward();
      return s;
    });
    params_.release();
    return stats;
  }

  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& params) override {
    params_.bind(params, nullptr);
    torch::NoGradGuard no_grad;
    module_.eval();
    return guarded(what() + ", evaluation", [&]() -> Expected<BatchStats> {
      at::Tensor loss;
      BatchStats s;
      TROUPE_RETURN_IF_ERROR(score(batch, forward(batch), &loss, &s));
      return s;
    });
  }

  std::string describe() const override {
    return file_ + " (" + std::to_string(params_.numel()) + " parameters in " +
           std::to_string(params_.count()) + " tensors)";
  }

  int64_t prediction_width() const override { return classes_ > 0 ? classes_ : width_; }

  Status predict(const Batch& batch, const Parameters& params, float* out) override {
    params_.bind(params, nullptr);
    torch::NoGradGuard no_grad;
    module_.eval();
    return guarded(what() + ", prediction", [&]() -> Status {
      const at::Tensor y = forward(batch).reshape({batch.size, -1}).contiguous();
      if (y.size(1) != prediction_width())
        return invalid_argument(what() + " returned " + std::to_string(y.size(1)) + " values per example; " +
                                std::to_string(prediction_width()) + " expected");
      std::copy_n(y.data_ptr<float>(), static_cast<size_t>(batch.size * prediction_width()), out);
      return {};
    });
  }

 private:
  std::string what() const { return "torchscript module " + file_; }

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
      has_loss_ = module_.find_method("loss").has_value();
      return {};
    });
  }

  Status set_shapes(const TrainerContext& ctx) {
    classes_ = ctx.data.classes;
    width_ = ctx.data.target_width;
    if (classes_ > 0 && width_ != 1 && !has_loss_)
      return invalid_argument(what() + ": this data's target holds " + std::to_string(width_) +
                              " classes per example; cross-entropy takes one (give the module a loss(output, "
                              "target) method for sequences)");
    auto shape = ctx.config.get_int_list("input_shape", ctx.data.input_shape());
    if (!shape.ok()) return shape.status();
    const int64_t n = std::accumulate(shape->begin(), shape->end(), int64_t{1}, std::multiplies<int64_t>());
    if (n != ctx.data.features)
      return invalid_argument("--trainer-arg input_shape: " + std::to_string(n) + " values per example, but the data "
                              "has " + std::to_string(ctx.data.features));
    input_shape_ = *shape;
    return {};
  }

  at::Tensor forward(const Batch& batch) {
    std::vector<int64_t> shape{batch.size};
    shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
    const at::Tensor x = torch::from_blob(const_cast<float*>(batch.inputs), shape, torch::kFloat32);
    return module_.forward({x}).toTensor();
  }

  // The batch's loss into `loss` (a tensor to back-propagate) and `s`: its value and, for classes,
  // how many examples the scores got right.
  Status score(const Batch& batch, const at::Tensor& out, at::Tensor* loss, BatchStats* s) {
    at::Tensor target;
    if (classes_ > 0) {
      target = torch::from_blob(const_cast<int32_t*>(batch.labels), {batch.size * width_}, torch::kInt32)
                   .to(torch::kLong);
      if (width_ == 1) target = target.reshape({batch.size});
    } else {
      target = torch::from_blob(const_cast<float*>(batch.targets), {batch.size, width_}, torch::kFloat32);
    }
    if (has_loss_) {
      *loss = module_.get_method("loss")({out, target}).toTensor();
    } else if (classes_ > 0) {
      if (out.dim() != 2 || out.size(0) != batch.size || out.size(1) != classes_)
        return invalid_argument(what() + " returned scores of shape " + shape_text(out) + "; [" +
                                std::to_string(batch.size) + ", " + std::to_string(classes_) +
                                "] expected for this data's " + std::to_string(classes_) + " classes");
      *loss = torch::nn::functional::cross_entropy(out, target);
    } else {
      if (out.numel() != batch.size * width_)
        return invalid_argument(what() + " returned values of shape " + shape_text(out) + "; " +
                                std::to_string(width_) + " per example expected");
      *loss = torch::mse_loss(out.reshape({batch.size, width_}), target);
    }
    s->loss = loss->item<float>();
    if (classes_ > 0 && width_ == 1 && out.dim() == 2)
      s->correct = out.argmax(1).eq(target).sum().item<int64_t>();
    return {};
  }

  static std::string shape_text(const at::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
  }

  std::string file_, local_;
  torch::jit::Module module_;
  torch_model::ParamBinding params_;
  bool has_loss_ = false;
  int classes_ = 0;
  int64_t width_ = 1;
  std::vector<int64_t> input_shape_;
};

}  // namespace

TROUPE_REGISTER_TRAINER("torchscript", TorchScriptTrainer);

}  // namespace troupe
