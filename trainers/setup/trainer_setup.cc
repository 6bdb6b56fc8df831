#include "trainers/setup/trainer_setup.h"

#include <algorithm>

#include "trainers/sync/trainer_driver.h"
#include "trainers/library/trainer_registry.h"

namespace troupe {

Status check_required_fields(const Trainer& trainer, const JobConfig& config, const DataSpec& data) {
  std::string have;
  for (const FieldSpec& f : data.fields) have += (have.empty() ? "" : "; ") + f.describe();
  for (const FieldNeed& need : trainer.required_fields(config)) {
    std::string wanted;
    for (ValueType t : need.types) wanted += std::string(wanted.empty() ? "" : " or ") + value_type_name(t);
    if (need.rank >= 0) wanted += (wanted.empty() ? "" : " ") + std::string("of per-example rank ") + std::to_string(need.rank);
    const std::string asked = "'" + need.name + "'" + (wanted.empty() ? "" : " (" + wanted + ")");
    const FieldSpec* f = data.field(need.name);
    if (!f) return invalid_argument("needs a field " + asked + "; the data has " + have);
    const bool type_ok = need.types.empty() || std::find(need.types.begin(), need.types.end(), f->type) != need.types.end();
    if (!type_ok || (need.rank >= 0 && need.rank != static_cast<int>(f->shape.size())))
      return invalid_argument("needs the field " + asked + "; the data's is " + f->describe());
  }
  return {};
}

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
  TROUPE_RETURN_IF_ERROR(check_required_fields(*s.trainer, ctx.config, data).with_context(s.where));
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
  oo.decay_matrices_only = o.weight_decay_params == "matrices";
  return oo;
}

Batch rows_batch(const Dataset& data, int64_t first, int64_t rows, BatchFields* fields, const DataSpec& spec) {
  Batch b;
  b.size = rows;
  b.features = data.features();
  b.inputs = data.images.data() + first * data.features();
  b.target_width = data.target_width;
  if (data.classifies()) b.labels = data.labels.data() + first * data.target_width;
  else b.targets = data.targets.data() + first * data.target_width;
  fields->bind(spec, &b);
  return b;
}

Expected<EvalTotals> evaluate_rows(Trainer& trainer, const Parameters& params, const Dataset& data, int64_t first,
                                   int64_t last) {
  constexpr int64_t kChunk = 1000;
  EvalTotals t;
  BatchFields fields;
  const DataSpec spec = data.spec();
  for (int64_t begin = first; begin < last; begin += kChunk) {
    const int64_t rows = std::min<int64_t>(kChunk, last - begin);
    auto s = trainer.evaluate(rows_batch(data, begin, rows, &fields, spec), params);
    if (!s.ok()) return s.status().with_context("evaluating rows " + std::to_string(begin) + " of the test set");
    if (s->correct < 0) t.counted = false;
    t.correct += s->correct;
    t.loss_sum += static_cast<double>(s->loss) * rows;
    t.rows += rows;
  }
  if (!t.counted) t.correct = -1;
  return t;
}

Expected<int64_t> count_correct(Trainer& trainer, const Parameters& params, const Dataset& data, int64_t first,
                                int64_t last) {
  auto t = evaluate_rows(trainer, params, data, first, last);
  if (!t.ok()) return t.status();
  return t->correct;
}

Expected<SplitScore> replicas_score(const EvalTotals& mine, int64_t examples, collectives::Communicator* comm,
                                    std::chrono::milliseconds timeout) {
  float counts[3] = {static_cast<float>(std::max<int64_t>(mine.correct, 0)), mine.correct < 0 ? 1.0f : 0.0f,
                     static_cast<float>(mine.loss_sum)};
  if (comm) {
    collectives::CollectiveOptions co;
    co.timeout = timeout;
    TROUPE_RETURN_IF_ERROR(comm->allreduce(counts, counts, 3, DType::f32, collectives::ReduceOp::sum, co)
                               .with_context("summing the replicas' test counts"));
  }
  SplitScore s;
  s.accuracy = counts[1] > 0 ? -1.0 : (examples ? static_cast<double>(counts[0]) / examples : 0.0);
  s.loss = examples ? static_cast<double>(counts[2]) / examples : 0.0;
  return s;
}

ExampleTransform trainer_transform(const Trainer& trainer, uint64_t seed) {
  if (!trainer.transforms_inputs()) return {};
  return [&trainer, seed](int epoch, int64_t example, float* inputs) {
    trainer.transform_example(example_seed(seed, epoch, example), inputs);
  };
}

ScopedTransform::ScopedTransform(BatchFeed& feed, const Trainer& trainer, uint64_t seed) : feed_(feed) {
  feed_.set_transform(trainer_transform(trainer, seed));
}

ScopedTransform::~ScopedTransform() { feed_.set_transform({}); }

}  // namespace troupe
