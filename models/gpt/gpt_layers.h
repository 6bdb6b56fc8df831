// The gpt as a chain of layers (trainers/api/trainer.h LayerModel), for the strategies that run a
// model layer by layer (`--shard parameters`: each layer's parameters gathered only while it runs):
//
//   layer 0        "embed"  token ids [T] (as f32)  ->  x [T x dim]       wte, wpe
//   layers 1..L    "h<l>"   x [T x dim]             ->  x [T x dim]       the block's 12 blocks
//   layer L + 1    "head"   x [T x dim]             ->  logits [T x V]    lnf.g, lnf.b, head
//
// Training keeps each block's activations and the final LayerNorm's per (layer, slot)
// (LayerModel::forward_layer_kept), so a layer's backward reads them; the stateless backward_layer
// computes the layer's forward again from its input. The loss is the mean cross-entropy over every
// position, as the whole model's. A tied model's (tie=1) head reads layer 0's token embedding: the
// head layer lists it in LayerInfo::shared (`--shard parameters` takes that; pipelines refuse it).
#pragma once

#include <cstdint>
#include <vector>

#include "models/gpt/gpt_model.h"

namespace troupe::models {

class GptLayers final : public LayerModel {
 public:
  // `model` (declared) outlives this; `seq` is the windows' length T.
  GptLayers(GptModel& model, int64_t seq) : model_(model), seq_(seq) {}

  std::vector<LayerInfo> layer_infos() const override;
  // The layers run the model's own code, in its precision (GptModel::set_precision).
  bool computes_in(DType p) const override { return p == model_.precision(); }
  Status forward_layer(int layer, const float* in, int64_t rows, const Parameters& params, float* out) override;
  Status backward_layer(int layer, const float* in, const float* out, float* dout, int64_t rows,
                        const Parameters& params, Gradients& grads, float* din) override;
  Status forward_layer_kept(int layer, int slot, const float* in, int64_t rows, const Parameters& params,
                            float* out) override;
  Status backward_layer_kept(int layer, int slot, const float* in, const float* out, float* dout, int64_t rows,
                             const Parameters& params, Gradients& grads, float* din) override;
  // Labels: the next token at each of the T positions of every row.
  Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) override;

 private:
  struct Kept {  // what a layer's backward reads of its forward
    GptModel::BlockActs block;        // a block's
    std::vector<float> lnf, mean, rstd;  // the head's final LayerNorm
  };
  Status read_ids(const float* in, int64_t rows);  // into ids_, checked
  Expected<Kept*> kept(int layer, int slot);
  Status forward_into(int layer, const float* in, int64_t rows, const Parameters& params, float* out, Kept& k);
  Status backward_from(int layer, const float* in, float* dout, int64_t rows, const Parameters& params,
                       Gradients& grads, float* din, const Kept& k);

  GptModel& model_;
  int64_t seq_;
  std::vector<int32_t> ids_;
  Kept scratch_kept_;                   // the stateless pair's
  std::vector<std::vector<Kept>> kept_;  // [slot][layer]
  std::vector<float> scratch_, recomputed_;
};

}  // namespace troupe::models
