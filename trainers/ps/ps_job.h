// What a parameter-server job assembles from its options, the same in every process: the shard a
// PS process hosts, with its slice of the job's initial parameters.
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "trainers/api/trainer.h"
#include "trainers/ps/parameter_shard.h"
#include "trainers/setup/train_options.h"

namespace troupe::ps {

struct PsJobShape {
  PsMode mode = PsMode::async;
  int workers = 1;
  int shards = 1;
  int64_t staleness = -1;   // async only: -1 unbounded, 0 synchronous, S
  int64_t train_examples = 0;  // rows of the training split (steps per epoch = rows / global batch)
  // The longest a pull waits for other workers, and a final pull for the slowest to finish: keep
  // it above the time the slowest worker can lag (and below the clients' timeout).
  std::chrono::milliseconds wait_timeout{30000};
};

// Shard `index` of a job: sets the trainer up (for its parameter blocks), fills the flat buffer
// with init_parameters(seed), cuts the partition, and builds the shard over its range with
// shard_options(). Errors: invalid_argument (bad options, an index outside the shards, a batch
// that does not divide among the workers or is larger than the data), the trainer's setup errors.
Expected<std::unique_ptr<ParameterShard>> make_job_shard(const TrainOptions& options, DataSpec data,
                                                         const PsJobShape& shape, int index);

}  // namespace troupe::ps
