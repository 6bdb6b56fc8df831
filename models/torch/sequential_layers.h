// A torchscript module that is a chain (a scripted nn.Sequential) as layers for the layer-by-layer
// strategies (pipelines, `--shard parameters`): each child with parameters starts a layer, and the
// children without (ReLU, pooling, Flatten, ...) join the layer before them (leading ones the first).
// A layer's forward runs its children on views of the stage's parameters; its backward runs autograd
// from the output gradient the runtime hands it, into the layer's gradient views (the ready hooks
// announce the blocks), and hands back the input's gradient. A training forward keeps its autograd
// graph for the backward of the same (layer, slot) while the parameters stay where they were. What a
// layer's training forward draws (dropout) follows the job's seed, the layer and its input
// (batch_randomness.h), so a forward run again for a backward draws the same.
#pragma once

#include <torch/script.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "models/torch/batch_randomness.h"
#include "models/torch/module_loss.h"
#include "models/torch/param_binding.h"
#include "trainers/api/trainer.h"

namespace troupe::torch_model {

class SequentialLayers final : public LayerModel {
 public:
  // The layers of `module` when it is a scripted nn.Sequential whose children's parameters are
  // `binding`'s in order; null when it is not a sequence or has buffers. `input_shape` is one example's;
  // `seed` the job's.
  static Expected<std::unique_ptr<SequentialLayers>> make(torch::jit::Module& module, ParamBinding& binding,
                                                          const std::vector<int64_t>& input_shape, LossSpec loss,
                                                          uint64_t seed);

  std::vector<LayerInfo> layer_infos() const override;
  Status forward_layer(int layer, const float* in, int64_t rows, const Parameters& params, float* out) override;
  Status backward_layer(int layer, const float* in, const float* out, float* dout, int64_t rows,
                        const Parameters& params, Gradients& grads, float* din) override;
  Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) override;
  bool scores_values() const override { return true; }
  Expected<BatchStats> output_loss_values(const float* out, const float* targets, int64_t rows, float* dout) override;
  Status forward_layer_kept(int layer, int slot, const float* in, int64_t rows, const Parameters& params,
                            float* out) override;
  Status backward_layer_kept(int layer, int slot, const float* in, const float* out, float* dout, int64_t rows,
                             const Parameters& params, Gradients& grads, float* din) override;

 private:
  struct Layer {
    std::string name;
    std::vector<torch::jit::Module> children;
    size_t first = 0, end = 0;         // its parameters in the binding
    std::vector<int64_t> in_shape, out_shape;  // one example's
    BatchRandomness rng;                       // its own: one layer may draw where another does not
  };
  // A training forward's graph, kept for its backward: the input (a leaf), the output, and where the
  // parameters were.
  struct Kept {
    at::Tensor in, out;
    std::vector<const float*> where;
  };

  SequentialLayers(torch::jit::Module& module, ParamBinding& binding, LossSpec loss)
      : module_(module), binding_(binding), loss_(std::move(loss)) {}
  Status find_layers(const std::vector<int64_t>& input_shape);
  at::Tensor run(const Layer& l, at::Tensor x);
  Expected<Kept> forward_graph(int layer, const float* in, int64_t rows, const Parameters& params);
  Status backward_graph(int layer, Kept& kept, const Parameters& params, float* dout, int64_t rows, Gradients& grads,
                        float* din);
  std::vector<const float*> where(const Layer& l, const Parameters& params) const;
  Expected<BatchStats> scored(const float* out, const at::Tensor& target, int64_t rows, float* dout);

  torch::jit::Module& module_;
  ParamBinding& binding_;
  LossSpec loss_;
  std::vector<Layer> layers_;
  std::map<std::pair<int, int>, Kept> kept_;
};

}  // namespace troupe::torch_model
