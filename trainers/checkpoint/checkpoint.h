// A whole checkpoint: the shard files of one step (shard_file.h) under
// <dir>/step-<step, 12 digits>/shard-<i>-of-<n>.ckpt, and the manifest that lists them. Shards cover
// the flat parameter buffer in contiguous ranges (a sync job: replica r writes slice r of N; a
// parameter-server job: server s its range). The manifest is written only after every shard is
// durable, and it is what makes a checkpoint exist (checkpoint_catalog.h keeps manifests in the GCS):
// shard files without a manifest are never used.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "trainers/checkpoint/shard_file.h"
#include "trainers/optim/optimizer.h"

namespace troupe::checkpoint {

struct Manifest {
  std::string tag;            // the job id (hex)
  int64_t step = 0;
  std::string dir;            // the step's directory
  std::vector<WrittenShard> shards;  // in shard order
};

// The training state a checkpoint restores: where training stopped and everything it needs to go
// on exactly as if it had not stopped.
struct TrainingState {
  int64_t step = 0;           // global steps done
  int64_t epoch = 0;          // epoch of the last step done (1-based)
  int64_t epoch_step = 0;     // steps of that epoch done
  std::vector<float> params;  // the whole buffer
  OptimizerState optimizer;   // the whole buffer's state
  std::vector<std::string> extras;  // load_checkpoint: each shard file's extra (shard_file.h), in shard order
};

// Where training goes on after a checkpoint: the epoch to train first (1-based) and how many of
// its steps were trained already (their batches are skipped); a checkpoint taken at the end of an
// epoch goes on with the next one.
struct ResumeAt {
  int epoch = 1;
  int64_t skip_steps = 0;
};
ResumeAt resume_at(const TrainingState& state, int64_t steps_per_epoch);

// <dir>/step-000000000120 and its shard i of n.
std::string step_dir(const std::string& dir, int64_t step);
std::string shard_path(const std::string& step_dir, int shard, int shards);

// The contiguous range of shard i of n over `total` floats: [total * i / n, total * (i + 1) / n).
void shard_range(size_t total, int shard, int shards, size_t* begin, size_t* end);

// Reads every shard of `manifest` (verifying each against the size and checksum recorded, then its
// own header and checksum) and assembles the whole state. corrupt_data naming the file when a
// shard is damaged, when shards disagree on the step or the optimizer, or do not cover
// [0, total_floats) without gaps; not_found when a file is missing. `total_floats` 0: any size.
Expected<TrainingState> load_checkpoint(const Manifest& manifest, size_t total_floats = 0);

// Every shard of `manifest` in order, each verified as load_checkpoint verifies it (and against the
// shards before it), handed to `take` one at a time: what is held at once is one shard file's
// contents. Errors as load_checkpoint's, or take's.
Status read_shards(const Manifest& manifest, size_t total_floats, const std::function<Status(ShardData& shard)>& take);

// Where the checkpoint stands — its step, epoch and steps of that epoch, no parameters — from its
// first shard's header alone (read_shard_header: unverified; whoever reads the payload later
// verifies every shard it reads). corrupt_data when the shard's step is not the manifest's.
Expected<TrainingState> read_position(const Manifest& manifest);

// Ranges [begin, end) of a checkpoint of a `total_floats`-parameter model, in order and disjoint:
// params and optimizer vectors hold the ranges' floats one after another (a sharded replica's
// chunks). Every shard is verified, one at a time (read_shards): nothing but one shard and the
// ranges is held. invalid_argument for ranges out of order or outside the model.
struct Range {
  size_t begin = 0, end = 0;
};
Expected<TrainingState> load_ranges(const Manifest& manifest, size_t total_floats, const std::vector<Range>& ranges);
// The same with other ranges for the optimizer state than for the parameters (a replica that holds
// the whole parameters and its chunks of the optimizer state). With no ranges at all: the step and
// epoch, every shard verified.
Expected<TrainingState> load_ranges(const Manifest& manifest, size_t total_floats, const std::vector<Range>& params,
                                    const std::vector<Range>& optimizer);

// The slice [begin, end) of a checkpoint of a `total_floats`-parameter model: its params and
// optimizer vectors hold end - begin floats (step, epoch and the optimizer's step count as in
// TrainingState). When shard `hint` holds exactly that range (a pipeline stage reading back what it
// wrote) only that shard is verified and read; otherwise (another layout: a sync job's slices,
// another partition) load_ranges of that one range. Errors as load_checkpoint's, and
// invalid_argument when the range is not inside the model.
Expected<TrainingState> load_range(const Manifest& manifest, size_t total_floats, size_t begin, size_t end, int hint);

// Called by a sync job's rank 0 once every replica's shard of a step is durable: records the
// checkpoint (the job layer writes the GCS manifest, then prunes old checkpoints). An error stops
// the job.
using CommitFn = std::function<Status(const Manifest&)>;

}  // namespace troupe::checkpoint
