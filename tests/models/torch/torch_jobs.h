// The torch tests' small job: `model` with its trainer args, batches of 24, SGD at 0.05 with momentum
// 0.9, seed 5, for `epochs` epochs (each test sets what it checks beyond that).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trainers/setup/train_options.h"

namespace troupe::testing {

inline TrainOptions torch_sgd_job(std::string model, std::vector<std::string> trainer_args, int epochs) {
  TrainOptions o;
  o.model = std::move(model);
  o.trainer_args = std::move(trainer_args);
  o.epochs = epochs;
  o.batch_size = 24;
  o.seed = 5;
  o.optimizer = "sgd";
  o.lr = 0.05f;
  o.momentum = 0.9f;
  return o;
}

}  // namespace troupe::testing
