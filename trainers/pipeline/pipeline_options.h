// What a pipeline-parallel job asks for (`--strategy pipeline --stages K [--microbatches M]
// [--schedule gpipe|1f1b] [--stage-layers 2,1,1,1]`, with `--workers N` for N/K replicas of the
// pipeline), and the checks every entry point (troupe train, troupe submit, the workers) runs.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/api/trainer.h"
#include "trainers/setup/train_options.h"

namespace troupe::pipeline {

struct PipelineOptions {
  int stages = 2;
  int microbatches = 4;          // per step and replica
  std::string schedule = "1f1b";  // gpipe | 1f1b
  std::string stage_layers;      // "" (balanced) or one layer count per stage, "2,1,1,1"
  int workers = 0;               // stage actors in all; 0: one replica (= stages)

  int replicas() const { return workers > 0 ? workers / stages : 1; }
};

// invalid_argument naming the first bad field and what to do: stages < 1, microbatches < 1, an
// unknown schedule, bad --stage-layers, workers not a multiple of stages, and a global batch that
// does not divide into replicas x microbatches ("--batch-size 100 does not divide into 2 replicas x
// 8 micro-batches; use a multiple of 16"). Stages against the model's layers are checked where
// the model is known (partition_layers).
Status validate(const PipelineOptions& options, int batch_size);

// What only the model can tell, checked before a job starts (troupe submit, for trainers it can
// build): the trainer declares its layers, and they can be cut into options.stages stages
// (partition_layers' errors: more stages than layers, --stage-layers that do not fit the model).
Status check_pipeline_model(const TrainOptions& train_options, const PipelineOptions& options, DataSpec data);

}  // namespace troupe::pipeline
