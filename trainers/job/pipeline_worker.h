// The body of a `--strategy pipeline` job's worker actor: worker w of N is stage w % K of replica
// w / K (K = --stages, N / K replicas).
//
//   spec, library, dataset (job_setup.h) -> form "job-<id>-pipe-<r>" (the K stages of replica r,
//   rank = stage) and "job-<id>-stage-<s>" (stage s of every replica, rank = replica) through the
//   GCS: shared memory on one node, TCP across nodes (collectives/group_transport.h)
//   -> train_stage (trainers/pipeline/stage_trainer.h): activations and gradients over the pipe
//   group's transport, the stage's gradients all-reduced over the stage group
//   -> every stage's report gathered over the pipe group; the last stage of replica 0 records
//   progress, per-worker metrics (bubble_fraction, memory_bytes, memory_fraction) and the summary
//   (per-stage layers, memory, measured bubble and the GPipe estimate (K-1)/(M+K-1)); with --save,
//   replica 0's stages first gather their ranges and the last one writes the model
//   (pipeline_model.h).
#pragma once

#include <atomic>

#include "actors/node_environment.h"
#include "trainers/job/job_setup.h"
#include "trainers/job/job_worker.h"

namespace troupe::job {

Status run_pipeline_worker(const actors::NodeEnvironment& env, const MemberArgs& args, JobSetup& setup,
                           const std::atomic<bool>& cancel);

}  // namespace troupe::job
