// What the tests of the sync replica's parts (trainers/sync/: step_rows, replica_state,
// gradient_sync, replica_checks) share: a trainer whose gradient is known in closed form, and a
// runner of one thread per replica over an in-process group.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "collectives/inproc_transport.h"
#include "trainers/api/trainer.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe::testing {

// One parameter block "w" of `features` floats. Its gradient is the batch's mean input, column by
// column (whatever the parameters), announced ready; the loss the mean of the first column; every
// row counts as correct.
class MeanInputTrainer final : public Trainer {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    w_ = space.declare("w", {ctx.data.features}, Init::zeros());
    return {};
  }
  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters&, Gradients& grads) override {
    float* g = grads[w_];
    for (int64_t j = 0; j < batch.features; ++j) {
      double sum = 0;
      for (int64_t r = 0; r < batch.size; ++r) sum += batch.inputs[r * batch.features + j];
      g[j] = static_cast<float>(sum / static_cast<double>(batch.size));
    }
    const float loss = g[0];  // read before ready(): the block is the runtime's after it
    grads.ready(w_);
    return BatchStats{loss, batch.size};
  }
  Expected<BatchStats> evaluate(const Batch& batch, const Parameters&) override { return BatchStats{0, batch.size}; }

 private:
  Param w_;
};

// A space of `features` floats set up by MeanInputTrainer.
inline ParameterSpace mean_input_space(MeanInputTrainer& trainer, int64_t features) {
  TrainerContext ctx;
  ctx.data.features = features;
  ctx.data.classes = 10;
  ParameterSpace space;
  Status st = trainer.setup(ctx, space);
  (void)st;
  return space;
}

// fn(rank, comm) on one thread per rank of an in-process group of `ranks`.
inline void on_replicas(int ranks, const std::function<void(int, collectives::Communicator&)>& fn) {
  auto transports = collectives::make_inproc_group(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      fn(r, comm);
    });
  for (auto& t : threads) t.join();
}

}  // namespace troupe::testing
