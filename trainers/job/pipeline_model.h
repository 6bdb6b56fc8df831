// `--save` of a pipeline job: each stage holds only its layers' range of the flat parameter buffer,
// so at the end replica 0's stages put theirs together over their pipe group (the replicas of a
// stage hold the same parameters): every stage's range is gathered (an all-gather of the ranges,
// then one broadcast per stage from that stage, bit-exact), and the last stage — the one that
// evaluated the test split and reports the job — writes the model file (trainers/setup/model_file.h).
#pragma once

#include <chrono>

#include "collectives/communicator.h"
#include "core/status.h"
#include "trainers/job/job_setup.h"
#include "trainers/pipeline/stage_trainer.h"

namespace troupe::job {

// On every stage of replica 0 (a collective over `pipe`, null for one stage), after train_stage
// returned `result`; `writer` (the last stage) writes spec.train.save_path. Errors: the
// collectives' (naming the gathering), ranges that do not tile the model, the trainer's setup
// declaring another number of parameters, the write's.
Status save_pipeline_model(const JobSetup& setup, const pipeline::StageResult& result, collectives::Communicator* pipe,
                           bool writer, std::chrono::milliseconds timeout);

}  // namespace troupe::job
