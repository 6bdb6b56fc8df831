// One stage of one replica of a pipeline-parallel job: the training loop around a StageExecutor.
//
//   setup the trainer -> its LayerModel -> partition_layers -> this stage's range of parameters
//   (initialised exactly as a single process would), gradients and optimizer state only
//   -> per step: the schedule's passes over M micro-batches (gradients summed), scaled by 1/M,
//      all-reduced (avg) with the same stage of the other replicas, then the optimizer step on
//      the range -> per epoch (or at the end): a forward-only pass over the test split.
//
// Replica r of R trains rows [r*b, (r+1)*b) of every global batch (b = batch / R) of the seeded
// shuffle, the rows a `sync` replica trains, so a pipeline of any shape applies the update one
// process applies to the global batch (to rounding). Stage 0 and the last stage read the data
// (inputs, labels); the others only activations.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "trainers/checkpoint/checkpoint.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/optim/optimizer.h"
#include "trainers/pipeline/pipeline_options.h"
#include "trainers/pipeline/stage_hold.h"
#include "trainers/setup/train_options.h"

namespace troupe::pipeline {

struct StageComms {
  collectives::Transport* pipe = nullptr;         // rank = stage, size = stages; null for one stage
  collectives::Communicator* replicas = nullptr;  // this stage of every replica; null for one replica
  std::chrono::milliseconds timeout{60000};       // per message and per all-reduce
  const std::atomic<bool>* cancel = nullptr;      // set to stop before the next step
  // Live recovery (stage_hold.h), or null: the state before each step's update is kept, and a run
  // cut short by a lost peer leaves its state here.
  StageHold* hold = nullptr;
  // With `hold`, a pipeline of one replica: the buddy mirror's distance on the pipe ring
  // (stage_mirror.h; 0: none) — after each update the stage's state goes to stage + distance.
  int mirror_distance = 0;
  // With a buddy mirror: its rounds every this many steps (and at the start); a lost stage then
  // takes its buddy's newest whole round, and the others roll back to it from their own rounds.
  int mirror_every = 1;
  int64_t* steps_done = nullptr;  // if set: the steps applied so far, kept current (a restart's steps lost)
};

// A stage's state at a step boundary, for a checkpoint: its range of the flat buffer and the
// optimizer over it.
struct StageSnapshot {
  int64_t step = 0;               // global steps done
  int epoch = 0;                  // the epoch of the last step (1-based)
  int64_t epoch_step = 0;         // steps of it done
  size_t begin = 0, end = 0;      // the stage's range of the flat buffer
  size_t total = 0;               // the whole model's parameters
  const float* params = nullptr;  // end - begin floats
  const Optimizer* optimizer = nullptr;
};

// Checkpoints of a pipeline (the job layer writes them: trainers/job/pipeline_worker.h). Every
// `every` steps each stage of each replica calls `write` after the step's update, at the same step
// on all of them; an error stops the stage. `resume`, once the stage knows its range [begin, end)
// of a `total`-parameter model: that range of a checkpoint to go on from (checkpoint::load_range),
// or nothing to start from the seed's parameters — training continues after the checkpoint's
// step, skipping the batches of its epoch already trained.
struct StageCheckpoints {
  int64_t every = 0;
  std::function<Status(const StageSnapshot&)> write;
  std::function<Expected<std::optional<checkpoint::TrainingState>>(size_t total, size_t begin, size_t end)> resume;
};

// What a stage measured and holds.
struct StageReport {
  int stage = 0, stages = 1, replica = 0, replicas = 1;
  int first_layer = 0, end_layer = 0;
  size_t begin = 0, end = 0;                    // its range of the flat buffer
  size_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  size_t model_bytes = 0;                       // the whole model's params + grads + optimizer state
  size_t activation_bytes = 0;                  // stash and gradient buffers of the schedule
  double busy_seconds = 0, pass_seconds = 0;    // computing / in the step's passes, in all
  double bubble_fraction = 0;                   // 1 - busy / pass: idle share of the passes
  double memory_fraction() const {
    return model_bytes ? static_cast<double>(param_bytes + grad_bytes + optimizer_bytes) / model_bytes : 0;
  }
};

struct StageResult {
  TrainResult train;     // loss, accuracy and history are the last stage's (others: none)
  StageReport report;
  std::vector<float> params;  // the stage's range [report.begin, report.end) after training
};

// Trains stage comms.pipe->rank() of its replica. `progress` is called by the last stage only.
// Errors (invalid_argument): bad options (validate), a trainer without layers (Trainer::layers()
// null), more stages than layers, a resume state of another size or optimizer; then the
// neighbours' and replicas' failures naming them, a non-finite loss (the last stage; it aborts the
// others), a layer's own errors, a checkpoint's write.
Expected<StageResult> train_stage(const TrainOptions& train_options, const PipelineOptions& options,
                                  const Dataset& train, const Dataset& test, const StageComms& comms,
                                  const ProgressFn& progress = {}, const StageCheckpoints& checkpoints = {});

}  // namespace troupe::pipeline
