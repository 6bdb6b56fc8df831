// Tied weights across pipeline stages (a gpt with tie=1, whose head is its token embedding): a
// block owned by one stage's layers that a layer of another stage reads too and adds gradients
// into (LayerInfo::shared). The stage of the reading layer (the block's user) holds a copy of the
// block, which its parameter and gradient views address as an extra segment (FlatSegment). Each
// step the users send the gradient they added into their copy to the owner, which adds it to its
// own before its replicas' all-reduce, so the optimizer updates the block once, with the whole
// model's gradient (and the gradient norm counts it once); after the update the owner sends the
// block's new values to its users — also once before training, so a resumed or --init-from stage
// starts from the owner's values. Checkpoints and --save hold the owner's block only.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "collectives/transport.h"
#include "core/status.h"
#include "trainers/api/trainer.h"
#include "trainers/pipeline/partition.h"

namespace troupe::pipeline {

struct TiedBlock {
  Param block;    // owned by a layer of stage `owner`
  int owner = 0;
  int user = 0;   // the stage of a layer that shares it
};

// Every tie between two stages of `plans` (one per block and using stage), in block order.
std::vector<TiedBlock> tied_blocks(const std::vector<LayerInfo>& layers, const std::vector<StagePlan>& plans);

class StageTies {
 public:
  // Stage `stage` of a pipeline whose range of the flat buffer starts at `begin`; `pipe` joins the
  // stages (null: one stage, no ties). The copies hold zeros until the first share_values().
  StageTies(std::vector<TiedBlock> ties, int stage, size_t begin, collectives::Transport* pipe,
            std::chrono::milliseconds timeout);

  bool empty() const { return mine_.empty() && owned_.empty(); }
  // The copies this stage holds, as segments for its views.
  const FlatSegment<const float>* param_segments() const { return params_seg_.data(); }
  const FlatSegment<float>* grad_segments() const { return grads_seg_.data(); }
  int segments() const { return static_cast<int>(mine_.size()); }
  size_t copy_floats() const;  // floats of the copies (each held as values and gradient)

  void zero_grads();
  // Users send their copies' gradients, owners add them into `grads` (the stage's range). Every
  // stage calls it once per step with the step's `sequence`; stages without ties return at once.
  Status gather_gradients(float* grads, uint64_t sequence);
  // Owners send the blocks' values from `params` (the stage's range), users receive them into
  // their copies.
  Status share_values(const float* params, uint64_t sequence);

 private:
  Status exchange(bool gradients, float* range, uint64_t sequence);

  std::vector<TiedBlock> ties_;   // every tie of the pipeline, in one order on every stage
  int stage_;
  size_t begin_;
  collectives::Transport* pipe_;
  std::chrono::milliseconds timeout_;
  std::vector<TiedBlock> mine_;   // ties this stage uses (holds a copy of)
  std::vector<TiedBlock> owned_;  // ties this stage owns
  std::vector<std::vector<float>> values_, grads_;  // per copy
  std::vector<FlatSegment<const float>> params_seg_;
  std::vector<FlatSegment<float>> grads_seg_;
};

}  // namespace troupe::pipeline
