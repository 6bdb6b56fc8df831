// A pipeline's checkpoint: at a step boundary each stage of one replica writes its layers' range
// of the flat buffer (and the optimizer state over it) as shard s of K; the last stage commits the
// manifest once all K shards are durable (trainers/checkpoint/collective_write.h). The shards tile
// the buffer as a sync job's slices do, so a pipeline's checkpoint loads whole (load_checkpoint)
// and a restarted stage reads only its own shard (load_range with hint s).
#pragma once

#include <chrono>
#include <string>

#include "collectives/communicator.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/pipeline/stage_trainer.h"

namespace troupe::pipeline {

// Stage `pipe`'s rank writes `snap` under `dir` (tagged `tag`, the job id); the last stage hands
// the manifest to `commit` (may be empty). `pipe` null: a pipeline of one stage.
Status write_stage_checkpoint(const StageSnapshot& snap, const std::string& tag, const std::string& dir,
                              collectives::Communicator* pipe, std::chrono::milliseconds timeout,
                              const checkpoint::CommitFn& commit);

}  // namespace troupe::pipeline
