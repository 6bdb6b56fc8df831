#include "models/torch/module_steps.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <numeric>

#include "models/torch/guarded.h"

namespace troupe::torch_model {
namespace {

// What a training forward's draws follow: the batch's inputs (`features` values an example) and
// targets.
uint64_t batch_key(const Batch& batch, int64_t features) {
  const auto rows = static_cast<size_t>(batch.size);
  const size_t width = static_cast<size_t>(batch.target_width);
  uint64_t key = batch.labels ? sample_key(batch.labels, rows * width * sizeof(int32_t), 1)
                              : batch.targets ? sample_key(batch.targets, rows * width * sizeof(float), 2) : 0;
  return sample_key(batch.inputs, rows * static_cast<size_t>(features) * sizeof(float), key);
}

}  // namespace

Expected<BatchStats> ModuleSteps::forward_backward(const Batch& batch, const Parameters& params, Gradients& grads) {
  params_.bind(params, &grads);
  set_training(true);
  auto stats = guarded(what() + ", forward and backward", [&]() -> Expected<BatchStats> {
    params_.load_state(params);
    const at::Tensor out = rng_.seeded(batch_key(batch, example_size()), [&] { return forward(batch); });
    params_.store_changes(params, grads, batch.loss_scale);  // BatchNorm's statistics of this batch
    at::Tensor loss;
    BatchStats s;
    TROUPE_RETURN_IF_ERROR(score(batch, out, &loss, &s));
    (batch.loss_scale == 1.0f ? loss : loss * batch.loss_scale).backward();
    return s;
  });
  params_.release();
  return stats;
}

Expected<BatchStats> ModuleSteps::evaluate(const Batch& batch, const Parameters& params) {
  params_.bind(params, nullptr);
  torch::NoGradGuard no_grad;
  set_training(false);
  return guarded(what() + ", evaluation", [&]() -> Expected<BatchStats> {
    params_.load_state(params);
    at::Tensor loss;
    BatchStats s;
    TROUPE_RETURN_IF_ERROR(score(batch, forward(batch), &loss, &s));
    return s;
  });
}

Status ModuleSteps::predict(const Batch& batch, const Parameters& params, float* out) {
  params_.bind(params, nullptr);
  torch::NoGradGuard no_grad;
  set_training(false);
  return guarded(what() + ", prediction", [&]() -> Status {
    params_.load_state(params);
    const at::Tensor y = forward(batch).reshape({batch.size, -1}).contiguous();
    if (y.size(1) != prediction_width())
      return invalid_argument(what() + " returned " + std::to_string(y.size(1)) + " values per example; " +
                              std::to_string(prediction_width()) + " expected");
    std::copy_n(y.data_ptr<float>(), static_cast<size_t>(batch.size * prediction_width()), out);
    return {};
  });
}

namespace {

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

}  // namespace

// libtorch's intra-op threads: threads=N, else the cpus the runtime gave this worker (cpus=, a job's
// --cpus-per-worker), else 1; inter-op work (torch.jit.fork) on the caller's thread.
Status ModuleSteps::set_threads(const TrainerContext& ctx) {
  auto cpus = ctx.config.get_int("cpus", 1);
  if (!cpus.ok()) return cpus.status();
  auto threads = ctx.config.get_int("threads", std::max<int64_t>(*cpus, 1));
  if (!threads.ok()) return threads.status();
  if (*threads < 1) return invalid_argument("--trainer-arg threads=" + std::to_string(*threads) + " must be >= 1");
  torch::set_num_threads(static_cast<int>(*threads));
  one_interop_thread();
  return {};
}

Status ModuleSteps::set_shapes(const TrainerContext& ctx, LossSpec::Own own) {
  loss_ = {ctx.data.classes, ctx.data.target_width, what(), std::move(own)};
  if (loss_.classes > 0 && loss_.width != 1 && !loss_.own)
    return invalid_argument(what() + ": this data's target holds " + std::to_string(loss_.width) +
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

int64_t ModuleSteps::example_size() const {
  return std::accumulate(input_shape_.begin(), input_shape_.end(), int64_t{1}, std::multiplies<int64_t>());
}

at::Tensor ModuleSteps::forward(const Batch& batch) {
  std::vector<int64_t> shape{batch.size};
  shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
  return run(torch::from_blob(const_cast<float*>(batch.inputs), shape, torch::kFloat32));
}

// The batch's loss into `loss` (a tensor to back-propagate) and `s`: its value and, for classes,
// how many examples the scores got right.
Status ModuleSteps::score(const Batch& batch, const at::Tensor& out, at::Tensor* loss, BatchStats* s) {
  const at::Tensor target = target_tensor(loss_, batch.labels, batch.targets, batch.size);
  TROUPE_RETURN_IF_ERROR(mean_loss(loss_, out, target, batch.size, loss));
  s->loss = loss->item<float>();
  s->correct = correct_count(loss_, out, target);
  return {};
}

}  // namespace troupe::torch_model
