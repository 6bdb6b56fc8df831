#include "trainers/trainer_setup.h"

#include <algorithm>

#include "trainers/trainer_driver.h"
#include "trainers/trainer_registry.h"

namespace troupe {

Expected<TrainerSetup> set_up_trainer(const TrainOptions& o, DataSpec data, int rank, int world) {
  auto made = trainer_registry().create(o.model);
  if (!made.ok()) return made.status();
  TrainerSetup s;
  s.trainer = std::move(*made);
  s.where = "trainer '" + o.model + "'";
  TrainerContext ctx;
  ctx.rank = rank;
  ctx.world_size = world;
  ctx.device = Device::cpu();
  ctx.data = data;
  ctx.seed = o.seed;
  auto config = trainer_config(o);
  if (!config.ok()) return config.status();
  ctx.config = *config;
  ctx.precision = o.precision;
  if (!s.trainer->supports_precision(o.precision)) {
    return invalid_argument(s.where + " computes in f32 only; --precision " + dtype_name(o.precision) +
                            " needs a trainer whose supports_precision() says yes (the built-in mlp does)");
  }
  TROUPE_RETURN_IF_ERROR(s.trainer->setup(ctx, s.space).with_context(s.where + ": setup"));
  TROUPE_RETURN_IF_ERROR(s.space.status().with_context(s.where + ": setup"));
  if (s.space.size() == 0) return invalid_argument(s.where + " declared no parameters in setup()");
  const std::string described = s.trainer->describe();
  s.model = o.model + " " + (described.empty() ? "(" + std::to_string(s.space.size()) + " parameters)" : described);
  return s;
}

OptimizerOptions optimizer_options(const TrainOptions& o) {
  OptimizerOptions oo;
  oo.name = o.optimizer;
  oo.lr = o.effective_lr();
  oo.momentum = o.momentum;
  oo.weight_decay = o.weight_decay;
  return oo;
}

Expected<int64_t> count_correct(Trainer& trainer, const Parameters& params, const Dataset& data, int64_t first,
                                int64_t last) {
  constexpr int64_t kChunk = 1000;
  int64_t correct = 0;
  bool counted = true;
  for (int64_t begin = first; begin < last; begin += kChunk) {
    Batch b;
    b.size = std::min<int64_t>(kChunk, last - begin);
    b.features = data.features();
    b.inputs = data.images.data() + begin * data.features();
    b.labels = data.labels.data() + begin;
    auto s = trainer.evaluate(b, params);
    if (!s.ok()) return s.status().with_context("evaluating rows " + std::to_string(begin) + " of the test set");
    if (s->correct < 0) counted = false;
    correct += s->correct;
  }
  return counted ? correct : -1;
}

Expected<double> replicas_accuracy(int64_t correct, int64_t examples, collectives::Communicator* comm,
                                   std::chrono::milliseconds timeout) {
  float counts[2] = {static_cast<float>(std::max<int64_t>(correct, 0)), correct < 0 ? 1.0f : 0.0f};
  if (comm) {
    collectives::CollectiveOptions co;
    co.timeout = timeout;
    TROUPE_RETURN_IF_ERROR(comm->allreduce(counts, counts, 2, DType::f32, collectives::ReduceOp::sum, co)
                               .with_context("summing the replicas' test counts"));
  }
  if (counts[1] > 0) return -1.0;
  return examples ? static_cast<double>(counts[0]) / examples : 0.0;
}

}  // namespace troupe
