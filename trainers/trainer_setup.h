// What every CPU training loop (sync replicas, parameter-server workers) does the same way around a
// Trainer: build it from the registry and run its setup(), turn TrainOptions into optimizer
// options, and count correct predictions on a split. One place, so the loops cannot drift apart.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "trainers/api/trainer.h"
#include "trainers/fashion_mnist.h"
#include "trainers/optimizer.h"
#include "trainers/train_options.h"

namespace troupe {

// A trainer after setup(): its declared parameter blocks and the names used in messages.
struct TrainerSetup {
  std::unique_ptr<Trainer> trainer;
  ParameterSpace space;
  std::string where;  // "trainer 'mlp'", the prefix of the loop's errors
  std::string model;  // "mlp 784-256-128-10", or "<name> (<n> parameters)" when describe() is empty
};

// Creates the trainer registered as options.model and runs setup() for replica `rank` of `world`
// on examples of shape `data`. Errors: invalid_argument (unknown trainer, a bad --trainer-arg, a
// setup() error or a bad declaration, no parameters declared).
Expected<TrainerSetup> set_up_trainer(const TrainOptions& options, DataSpec data, int rank, int world);

// The optimizer a job's options ask for: name, effective rate, momentum, weight decay.
OptimizerOptions optimizer_options(const TrainOptions& options);

// Correct predictions over rows [first, last) of `data` (-1 when the trainer does not count them),
// in chunks so a trainer's activations stay small.
Expected<int64_t> count_correct(Trainer& trainer, const Parameters& params, const Dataset& data, int64_t first,
                                int64_t last);

// Test accuracy of replicas that each counted their own slice of `examples` test rows (`correct`,
// -1 when the trainer does not count): one all-reduce over `comm` (null: this replica alone) sums
// them. -1 when any replica could not count.
Expected<double> replicas_accuracy(int64_t correct, int64_t examples, collectives::Communicator* comm,
                                   std::chrono::milliseconds timeout);

}  // namespace troupe
