// Optimizers over one flat parameter buffer, owning their state (velocity, Adam moments) in buffers
// of the same layout. The runtime, not the model, owns and steps them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace troupe {

class ParameterSpace;  // trainers/api/trainer.h

struct OptimizerOptions {
  std::string name = "sgd";   // sgd, adam, adamw
  float lr = 0.05f;
  float momentum = 0.9f;      // sgd
  float weight_decay = 0.0f;  // sgd and adam: L2 on the gradient; adamw: decoupled
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
  // adamw with decay_matrices_only (`--weight-decay-params matrices`): the decoupled decay applies
  // to the ranges [first, second) of decay_ranges only (the blocks of rank >= 2: see
  // matrix_ranges), which the runtime fills from the model's blocks; make_optimizer refuses the
  // setting while decay_ranges_set is false (a path that cannot tell the blocks apart yet).
  bool decay_matrices_only = false;
  bool decay_ranges_set = false;
  std::vector<std::pair<size_t, size_t>> decay_ranges;
  // Model state, not trained (ParameterSpace::declare_state): the ranges [first, second) of the
  // optimizer's parameters (relative to them: cut to a chunk or shard) that step() leaves to the
  // rule `param += grad` (the averaged change the trainer made) instead of the optimizer's; see
  // state_ranges(). Sorted and disjoint.
  std::vector<std::pair<size_t, size_t>> state_ranges;
};

// An optimizer's state, or a slice [begin, begin + length) of it, for checkpoints: the step count
// (Adam's bias correction depends on it) and its state vectors in a fixed order (sgd with momentum:
// velocity; adam/adamw: m, v; sgd without momentum: none), each `length` floats.
struct OptimizerState {
  std::string name;                       // "sgd", "adam", "adamw"
  int64_t steps = 0;
  std::vector<std::vector<float>> vectors;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update to params[0, n) from grads[0, n); the state ranges (OptimizerOptions::
  // state_ranges) take their change, params += grads, and nothing of the optimizer's rule.
  void step(float* params, const float* grads);
  virtual std::string describe() const = 0;  // "sgd(lr=0.05, momentum=0.9)"
  // Changes the learning rate from the next step on (schedules call this every step).
  virtual void set_lr(float lr) = 0;
  int64_t steps() const { return steps_; }
  virtual std::string name() const = 0;  // "sgd", "adam", "adamw"
  // The state of parameters [begin, end) and the step count. end <= the optimizer's size.
  OptimizerState save_state(size_t begin, size_t end) const;
  // The same into `out`, reusing its vectors' memory (a copy every step allocates nothing).
  void save_state_into(size_t begin, size_t end, OptimizerState* out) const;
  // [begin, end) of state vector `v` (OptimizerState's order) copied to `out` (a buddy mirror's
  // record, written in place every round).
  void copy_state(size_t v, size_t begin, size_t end, float* out) const;
  // Restores parameters [begin, begin + length)'s state and the step count from `state` (a slice
  // saved by save_state from an optimizer of the same name). invalid_argument when the name, the
  // number of vectors or their lengths do not fit, naming what differs; on error nothing changes.
  Status load_state(const OptimizerState& state, size_t begin);

  void set_state_ranges(std::vector<std::pair<size_t, size_t>> ranges) { state_ranges_ = std::move(ranges); }
  const std::vector<std::pair<size_t, size_t>>& kept_ranges() const { return state_ranges_; }  // as set

 protected:
  virtual void apply(float* params, const float* grads) = 0;  // the rule, over params[0, n)
  virtual std::vector<std::vector<float>*> state_vectors() = 0;  // in OptimizerState's order
  std::vector<const std::vector<float>*> state_vectors() const;
  virtual size_t size() const = 0;
  int64_t steps_ = 0;

 private:
  std::vector<std::pair<size_t, size_t>> state_ranges_;
  std::vector<float> kept_;  // the state ranges' values before the rule ran over them
};

// The flat ranges of `space`'s blocks of rank >= 2 (weight matrices and embeddings), merged where
// adjacent: what `--weight-decay-params matrices` decays. Biases and LayerNorm gains are rank 1.
std::vector<std::pair<size_t, size_t>> matrix_ranges(const ParameterSpace& space);

// The flat ranges of `space`'s state blocks (ParameterSpace::declare_state), merged where adjacent.
std::vector<std::pair<size_t, size_t>> state_ranges(const ParameterSpace& space);
// The parts of sorted `ranges` inside [begin, end), relative to begin (a chunk's or shard's share).
std::vector<std::pair<size_t, size_t>> ranges_within(const std::vector<std::pair<size_t, size_t>>& ranges,
                                                     size_t begin, size_t end);

// Builds an optimizer for `n` parameters. Unknown names or out-of-range values are invalid_argument.
Expected<std::unique_ptr<Optimizer>> make_optimizer(const OptimizerOptions& options, size_t n);

}  // namespace troupe
