// The gpt as a chain of layers (trainers/api/trainer.h LayerModel), for the strategies that run a
// model layer by layer (`--shard parameters`: each layer's parameters gathered only while it runs):
//
//   layer 0        "embed"  token ids [T] (as f32)  ->  x [T x dim]       wte, wpe
//   layers 1..L    "h<l>"   x [T x dim]             ->  x [T x dim]       the block's 12 blocks
//   layer L + 1    "head"   x [T x dim]             ->  logits [T x V]    lnf.g, lnf.b, head
//
// A layer's backward recomputes its forward from its input (LayerModel keeps only the layers'
// inputs and outputs: activation checkpointing, one more forward of each block per step). The
// loss is the mean cross-entropy over every position, as the whole model's. A tied model (tie=1)
// does not split: its head is layer 0's embedding (GptTrainer::layers() is null for it).
#pragma once

#include <cstdint>
#include <vector>

#include "models/gpt/gpt_model.h"

namespace troupe::models {

class GptLayers final : public LayerModel {
 public:
  // `model` (declared, untied) outlives this; `seq` is the windows' length T.
  GptLayers(GptModel& model, int64_t seq) : model_(model), seq_(seq) {}

  std::vector<LayerInfo> layer_infos() const override;
  Status forward_layer(int layer, const float* in, int64_t rows, const Parameters& params, float* out) override;
  Status backward_layer(int layer, const float* in, const float* out, float* dout, int64_t rows,
                        const Parameters& params, Gradients& grads, float* din) override;
  // Labels: the next token at each of the T positions of every row.
  Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) override;

 private:
  Status read_ids(const float* in, int64_t rows);  // into ids_, checked

  GptModel& model_;
  int64_t seq_;
  std::vector<int32_t> ids_;
  GptModel::BlockActs acts_;  // one block's, recomputed for its backward
  std::vector<float> lnf_, mean_, rstd_, scratch_;
};

}  // namespace troupe::models
