// A pipeline-parallel job inside one process (`troupe train --strategy pipeline`, the equivalence
// tests, the benchmark): one thread per stage actor, R replicas x K stages, the stages of a
// replica connected by an in-process transport and the same stage of every replica by an
// in-process Communicator — the same train_stage the cluster's workers run over shm or TCP.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "data/readers/fashion_mnist.h"
#include "trainers/pipeline/pipeline_options.h"
#include "trainers/pipeline/stage_trainer.h"
#include "trainers/setup/train_options.h"

namespace troupe::pipeline {

struct LocalPipelineResult {
  TrainResult train;                 // the last stage of replica 0's (loss, accuracy, history)
  std::vector<StageReport> stages;   // replica 0's, stage by stage
  std::vector<float> params;         // the whole model, assembled from replica 0's stages
};

// Checkpoints of a local pipeline (stage_checkpoint.h): every `every` steps under `dir`, the
// manifest to `commit`; `resume`: a checkpoint to go on from (each stage reads its own shard).
// `cancel` stops every stage before its next step.
struct LocalCheckpoints {
  int64_t every = 0;
  std::string dir;
  checkpoint::CommitFn commit;
  const checkpoint::Manifest* resume = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  // Live recovery (stage_hold.h), worker w = r * K + s at index w: `holds` (R x K) keep each stage's
  // state when a run is cut short; `live` (R x K, empty entries none) the states to go on from.
  std::vector<StageHold>* holds = nullptr;
  std::vector<std::optional<checkpoint::TrainingState>>* live = nullptr;
  int mirror_distance = 0;  // with holds: StageComms::mirror_distance
  int mirror_every = 1;     //   and StageComms::mirror_every
};

// Runs every stage actor; the first error (in stage order) is returned, prefixed with its stage
// and replica. `progress` follows the last stage of replica 0.
Expected<LocalPipelineResult> train_local_pipeline(const TrainOptions& train_options, const PipelineOptions& options,
                                                   const Dataset& train, const Dataset& test,
                                                   const ProgressFn& progress = {},
                                                   std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                                   const LocalCheckpoints& checkpoints = {});

}  // namespace troupe::pipeline
