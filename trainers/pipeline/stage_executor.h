// One pipeline stage's passes: the forward and backward of its layers over a step's micro-batches
// in the schedule's order (schedule.h), with activations and their gradients exchanged with the
// neighbouring stages through the pipeline's Transport (shared memory on one host, TCP across
// hosts; never CAF messages), and forward-only passes for evaluation.
//
// Buffers are allocated once: per stash slot the stage's input and every layer's output for one
// micro-batch (what backward reads), and two gradient buffers used in turn. Compute time is
// measured around the layer calls; the rest of a step's passes is time the stage was idle
// (waiting for a neighbour, or moving bytes): the bubble.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "collectives/transport.h"
#include "trainers/api/trainer.h"
#include "trainers/pipeline/layer_loss.h"
#include "trainers/pipeline/partition.h"
#include "trainers/pipeline/schedule.h"

namespace troupe::pipeline {

struct StepTotals {
  double loss_sum = 0;   // last stage: sum of the micro-batches' mean losses
  int64_t correct = 0;   // last stage: examples predicted right (-1: the model does not count)
};

class StageExecutor {
 public:
  // `pipe` connects the stages (rank = stage); null only for a pipeline of one stage.
  StageExecutor(LayerModel& model, std::vector<LayerInfo> layers, StagePlan plan, int stage, int stages,
                collectives::Transport* pipe, int64_t micro_rows, int slots, std::chrono::milliseconds timeout);

  // The forward and backward passes of one step: `ops` of stage_ops(). Stage 0 reads micro-batch m
  // at inputs + m * micro_rows * features; the last stage reads its targets likewise. Parameter
  // gradients are added into `grads` (the caller zeroes them per step). `sequence` is the same on
  // every stage for the same step (stamped on every message, so stages out of step are an error).
  // Errors: the transport's (a neighbour died or timed out, naming it), a layer's own.
  Status run_step(const std::vector<PipeOp>& ops, const float* inputs, const TargetRows& targets,
                  const Parameters& params, Gradients& grads, uint64_t sequence, StepTotals* totals);

  // A forward-only pass over `rows` examples in chunks of up to `chunk` rows (the same on every
  // stage); the last stage sums loss x rows and correct predictions into *totals.
  Status forward_only(const float* inputs, const TargetRows& targets, int64_t rows, int64_t features,
                      int64_t chunk, const Parameters& params, uint64_t sequence, StepTotals* totals);

  // `value` summed over the stages of this replica's pipeline, added in stage order (stage 0 gathers
  // and sends the total back; the same on every stage): the squares of every stage's gradients for
  // --clip-grad-norm's global norm. `sequence` names the step, as run_step's.
  Expected<double> sum_over_stages(double value, uint64_t sequence);

  // Labels (or values) per example (a sequence model's: one per position; 1 by default): the last
  // stage reads micro-batch m's at labels + m * micro_rows * width.
  void set_label_width(int64_t width) { label_width_ = width; }

  double busy_seconds() const { return busy_seconds_; }  // time in layer calls and the loss, in all
  size_t activation_bytes() const;                          // the stash and gradient buffers

 private:
  struct Outgoing {
    int peer = -1;
    const void* data = nullptr;
    size_t bytes = 0;
  };
  // Receives `bytes` from `peer` into `into`, exchanging the pending message in the same
  // send_recv when it goes to the same peer; otherwise sends it first.
  Status receive(int peer, void* into, size_t bytes);
  Status flush();
  // Through the stage's layers; `slot` >= 0 when training (the layers keep activations for that
  // micro-batch slot's backward: LayerModel::forward_layer_kept), -1 when evaluating.
  Status forward_micro(const float* in, int64_t rows, const Parameters& params, std::vector<float*>& outs, int slot);
  const float* micro_input(int slot, int micro, const float* inputs, int64_t rows);

  LayerModel& model_;
  std::vector<LayerInfo> layers_;
  StagePlan plan_;
  int stage_, stages_;
  collectives::Transport* pipe_;
  int64_t micro_rows_;
  int64_t label_width_ = 1;
  int slots_;
  std::chrono::milliseconds timeout_;
  std::vector<std::vector<float>> inputs_;               // per slot (not stage 0)
  std::vector<std::vector<std::vector<float>>> outputs_;  // per slot, per layer of the stage
  std::vector<float> grad_a_, grad_b_;
  Outgoing pending_;
  double busy_seconds_ = 0;
};

}  // namespace troupe::pipeline
