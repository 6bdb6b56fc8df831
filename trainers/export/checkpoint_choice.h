// Which of a job's checkpoints `troupe export` reads, and reading it: the newest intact one by
// default — each newer one that cannot be used (a damaged or missing shard file, a damaged manifest)
// skipped and named — or exactly the step asked for, whose defects are errors naming the file.
// "Intact" is what load_checkpoint checks: every shard file at the size and checksum its manifest
// recorded, its own header and checksum, and the shards tiling the whole parameter buffer — checked
// one shard at a time (checkpoint::read_shards), never holding the whole checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/export/checkpoint_source.h"

namespace troupe::exporting {

struct ChosenCheckpoint {
  checkpoint::TrainingState state;   // its step and epoch (no parameters: read them from manifest)
  checkpoint::Manifest manifest;
  std::string dir;                   // its step directory
  std::vector<std::string> skipped;  // newer checkpoints not used, one line each: step and why
};

// The checkpoint of `step` (-1: the newest intact one; src.only_step when a step directory was
// given) of a `total_floats`-parameter model. Errors:
//   not_found         no checkpoint at all; no checkpoint of `step` (listing the steps there are);
//                     none intact (listing why each was skipped)
//   corrupt_data      the requested step's checkpoint is damaged (naming the shard or manifest file)
//   invalid_argument  a checkpoint of another number of parameters than the trainer declares (not a
//                     damage: another trainer or other settings), or a --step that contradicts the
//                     step directory given
Expected<ChosenCheckpoint> choose_checkpoint(const CheckpointSource& src, int64_t step, size_t total_floats);

// "20, 40, 60": the steps of the usable-looking checkpoints, oldest first.
std::string list_steps(const CheckpointSource& src);

}  // namespace troupe::exporting
