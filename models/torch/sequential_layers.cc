#include "models/torch/sequential_layers.h"

#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "models/torch/guarded.h"

namespace troupe::torch_model {
namespace {

// An nn.Sequential, also where TorchScript mangled its type's name (a second Sequential scripted in one
// Python session: torch.nn.modules.container.___torch_mangle_3.Sequential).
bool is_sequential(const torch::jit::Module& module) {
  const auto name = module.type()->name();
  return name && name->name() == "Sequential" &&
         name->qualifiedName().find("torch.nn.modules.container.") != std::string::npos;
}

size_t trainable_count(const torch::jit::Module& child) {
  size_t n = 0;
  for (const at::Tensor& p : child.parameters(/*recurse=*/true)) n += p.requires_grad() ? 1 : 0;
  return n;
}

int64_t per_example(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

std::vector<int64_t> with_rows(int64_t rows, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out{rows};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

void copy_out(const at::Tensor& t, float* out) {
  const at::Tensor c = t.contiguous();
  std::copy_n(c.data_ptr<float>(), static_cast<size_t>(c.numel()), out);
}

}  // namespace

Expected<std::unique_ptr<SequentialLayers>> SequentialLayers::make(torch::jit::Module& module, ParamBinding& binding,
                                                                   const std::vector<int64_t>& input_shape,
                                                                   LossSpec loss, uint64_t seed) {
  // Buffers (BatchNorm's statistics) are state blocks after every parameter, in no layer's range:
  // such a module trains whole (not yet split into stages or gathered layer by layer).
  if (!is_sequential(module) || binding.buffers() > 0) return std::unique_ptr<SequentialLayers>();
  std::unique_ptr<SequentialLayers> layers(new SequentialLayers(module, binding, std::move(loss)));
  TROUPE_RETURN_IF_ERROR(layers->find_layers(input_shape));
  for (Layer& l : layers->layers_) l.rng.set_seed(seed);
  return layers;
}

// The children in layers, checked against the binding's order; each layer's shapes from a forward
// of two zero examples in evaluation mode (no statistics updated).
Status SequentialLayers::find_layers(const std::vector<int64_t>& input_shape) {
  size_t at = 0;
  Layer cur;
  for (const auto& child : module_.named_children()) {
    const size_t n = trainable_count(child.value);
    if (n > 0 && cur.end > cur.first) {
      layers_.push_back(std::move(cur));
      cur = Layer{};
    }
    if (n > 0) {
      cur.name = child.name;
      cur.first = at;
      cur.end = at += n;
      for (size_t i = cur.first; i < cur.end; ++i)
        if (binding_.name(i).rfind(child.name + ".", 0) != 0)
          return invalid_argument(loss_.what + ": parameter '" + binding_.name(i) + "' is not child " + child.name +
                                  "'s: the children's parameters must come in the children's order");
    }
    cur.children.push_back(child.value);
  }
  if (!cur.children.empty()) layers_.push_back(std::move(cur));
  if (at != binding_.count())
    return invalid_argument(loss_.what + ": " + std::to_string(binding_.count() - at) +
                            " parameters belong to no child; a pipeline needs every parameter in a child");
  return guarded(loss_.what + ", finding its layers' shapes", [&]() -> Status {
    torch::NoGradGuard no_grad;
    module_.eval();
    at::Tensor x = torch::zeros(with_rows(2, input_shape));
    for (Layer& l : layers_) {
      l.in_shape.assign(x.sizes().begin() + 1, x.sizes().end());
      x = run(l, x);
      l.out_shape.assign(x.sizes().begin() + 1, x.sizes().end());
    }
    return Status{};
  });
}

std::vector<LayerInfo> SequentialLayers::layer_infos() const {
  std::vector<LayerInfo> out;
  for (const Layer& l : layers_) {
    LayerInfo info;
    info.name = l.name;
    for (size_t i = l.first; i < l.end; ++i) info.params.push_back(binding_.param(i));
    info.out_features = per_example(l.out_shape);
    out.push_back(std::move(info));
  }
  return out;
}

at::Tensor SequentialLayers::run(const Layer& l, at::Tensor x) {
  for (const torch::jit::Module& child : l.children) x = const_cast<torch::jit::Module&>(child).forward({x}).toTensor();
  return x;
}

std::vector<const float*> SequentialLayers::where(const Layer& l, const Parameters& params) const {
  std::vector<const float*> out;
  for (size_t i = l.first; i < l.end; ++i) out.push_back(params[binding_.param(i)]);
  return out;
}

Status SequentialLayers::forward_layer(int layer, const float* in, int64_t rows, const Parameters& params, float* out) {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  return guarded(loss_.what + ", layer " + l.name + " forward", [&]() -> Status {
    torch::NoGradGuard no_grad;
    module_.eval();
    binding_.bind_range(l.first, l.end, params, nullptr);
    const at::Tensor x = torch::from_blob(const_cast<float*>(in), with_rows(rows, l.in_shape), torch::kFloat32);
    copy_out(run(l, x), out);
    return Status{};
  });
}

Expected<SequentialLayers::Kept> SequentialLayers::forward_graph(int layer, const float* in, int64_t rows,
                                                                 const Parameters& params) {
  Layer& l = layers_[static_cast<size_t>(layer)];
  return guarded(loss_.what + ", layer " + l.name + " forward", [&]() -> Expected<Kept> {
    module_.train();
    binding_.bind_range(l.first, l.end, params, nullptr);
    Kept k;
    k.in = torch::from_blob(const_cast<float*>(in), with_rows(rows, l.in_shape), torch::kFloat32).clone();
    if (layer > 0) k.in.requires_grad_(true);
    const uint64_t key = sample_key(in, static_cast<size_t>(rows * per_example(l.in_shape)) * sizeof(float),
                                    static_cast<uint64_t>(layer));
    k.out = l.rng.seeded(key, [&] { return run(l, k.in); });
    k.where = where(l, params);
    return k;
  });
}

Status SequentialLayers::backward_graph(int layer, Kept& kept, const Parameters& params, float* dout, int64_t rows,
                                        Gradients& grads, float* din) {
  const Layer& l = layers_[static_cast<size_t>(layer)];
  return guarded(loss_.what + ", layer " + l.name + " backward", [&]() -> Status {
    binding_.bind_range(l.first, l.end, params, &grads);  // the parameters where the forward found them
    kept.out.backward(torch::from_blob(dout, with_rows(rows, l.out_shape), torch::kFloat32));
    binding_.release();
    if (din) copy_out(kept.in.grad(), din);
    return Status{};
  });
}

Status SequentialLayers::forward_layer_kept(int layer, int slot, const float* in, int64_t rows,
                                            const Parameters& params, float* out) {
  auto kept = forward_graph(layer, in, rows, params);
  if (!kept.ok()) return kept.status();
  copy_out(kept->out, out);
  kept_[{layer, slot}] = std::move(*kept);
  return {};
}

Status SequentialLayers::backward_layer_kept(int layer, int slot, const float* in, const float* out, float* dout,
                                             int64_t rows, const Parameters& params, Gradients& grads, float* din) {
  auto it = kept_.find({layer, slot});
  // Parameters gathered again elsewhere (`--shard parameters`): the kept graph reads the old place.
  if (it == kept_.end() || it->second.where != where(layers_[static_cast<size_t>(layer)], params)) {
    if (it != kept_.end()) kept_.erase(it);
    return backward_layer(layer, in, out, dout, rows, params, grads, din);
  }
  Kept kept = std::move(it->second);
  kept_.erase(it);
  return backward_graph(layer, kept, params, dout, rows, grads, din);
}

Status SequentialLayers::backward_layer(int layer, const float* in, const float* /*out*/, float* dout, int64_t rows,
                                        const Parameters& params, Gradients& grads, float* din) {
  auto kept = forward_graph(layer, in, rows, params);
  if (!kept.ok()) return kept.status();
  return backward_graph(layer, *kept, params, dout, rows, grads, din);
}

Expected<BatchStats> SequentialLayers::output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) {
  return scored(out, target_tensor(loss_, labels, nullptr, rows), rows, dout);
}

Expected<BatchStats> SequentialLayers::output_loss_values(const float* out, const float* targets, int64_t rows,
                                                          float* dout) {
  return scored(out, target_tensor(loss_, nullptr, targets, rows), rows, dout);
}

Expected<BatchStats> SequentialLayers::scored(const float* out, const at::Tensor& target, int64_t rows, float* dout) {
  return guarded(loss_.what + ", loss", [&]() -> Expected<BatchStats> {
    torch::AutoGradMode grad_mode(dout != nullptr);
    at::Tensor o = torch::from_blob(const_cast<float*>(out), with_rows(rows, layers_.back().out_shape), torch::kFloat32)
                       .clone()
                       .requires_grad_(dout != nullptr);
    at::Tensor loss;
    TROUPE_RETURN_IF_ERROR(mean_loss(loss_, o, target, rows, &loss));
    BatchStats s;
    s.loss = loss.item<float>();
    s.correct = correct_count(loss_, o.detach(), target);
    if (dout) {
      loss.backward();
      copy_out(o.grad(), dout);
    }
    return s;
  });
}

}  // namespace troupe::torch_model
