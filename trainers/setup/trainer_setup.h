// What every CPU training loop (sync replicas, parameter-server workers) does the same way around a
// Trainer: build it from the registry and run its setup(), turn TrainOptions into optimizer
// options, and count correct predictions on a split. One place, so the loops cannot drift apart.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "data/feed/batch_feed.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/api/trainer.h"
#include "trainers/optim/optimizer.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// A trainer after setup(): its declared parameter blocks and the names used in messages.
struct TrainerSetup {
  std::unique_ptr<Trainer> trainer;
  ParameterSpace space;
  std::string where;  // "trainer 'mlp'", the prefix of the loop's errors
  std::string model;  // "mlp 784-256-128-10", or "<name> (<n> parameters)" when describe() is empty
};

// The fields `trainer` needs with `config` (Trainer::required_fields) against the data's: ok, or
// invalid_argument naming the missing or mistyped field and what the data has.
Status check_required_fields(const Trainer& trainer, const JobConfig& config, const DataSpec& data);

// Creates the trainer registered as options.model and runs setup() for replica `rank` of `world`
// on examples of shape `data`. Errors: invalid_argument (unknown trainer, a bad --trainer-arg, a
// setup() error or a bad declaration, no parameters declared).
Expected<TrainerSetup> set_up_trainer(const TrainOptions& options, DataSpec data, int rank, int world);

// The optimizer a job's options ask for: name, effective rate, momentum, weight decay.
OptimizerOptions optimizer_options(const TrainOptions& options);

// Rows [first, first + rows) of `data` as a Batch (its fields bound through *fields).
Batch rows_batch(const Dataset& data, int64_t first, int64_t rows, BatchFields* fields, const DataSpec& spec);

// Evaluation of rows [first, last) of `data`, in chunks so a trainer's activations stay small:
// correct predictions (-1 when the trainer does not count them) and the sum of the batches' mean
// losses weighted by their rows.
struct EvalTotals {
  int64_t correct = 0;
  double loss_sum = 0;
  int64_t rows = 0;
  bool counted = true;
};
Expected<EvalTotals> evaluate_rows(Trainer& trainer, const Parameters& params, const Dataset& data, int64_t first,
                                   int64_t last);
// Its correct count alone.
Expected<int64_t> count_correct(Trainer& trainer, const Parameters& params, const Dataset& data, int64_t first,
                                int64_t last);

// The test accuracy (-1 when any replica could not count) and mean loss of replicas that each
// evaluated their own slice of `examples` rows: one all-reduce over `comm` (null: alone).
struct SplitScore {
  double accuracy = -1;
  double loss = 0;
};
Expected<SplitScore> replicas_score(const EvalTotals& mine, int64_t examples, collectives::Communicator* comm,
                                    std::chrono::milliseconds timeout);


// ---- augmentation in a training loop's feed ----

// `trainer`'s transform_example as a feed's transform (empty when it transforms nothing); the
// trainer must outlive the feed's use of it.
ExampleTransform trainer_transform(const Trainer& trainer, uint64_t seed);

// Sets `trainer`'s transform on `feed` for the life of this object, then clears it (the transform
// refers to the trainer, which a training loop owns only while it runs).
class ScopedTransform {
 public:
  ScopedTransform(BatchFeed& feed, const Trainer& trainer, uint64_t seed);
  ~ScopedTransform();
  ScopedTransform(const ScopedTransform&) = delete;
  ScopedTransform& operator=(const ScopedTransform&) = delete;

 private:
  BatchFeed& feed_;
};

}  // namespace troupe
