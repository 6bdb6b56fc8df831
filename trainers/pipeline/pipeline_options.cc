#include "trainers/pipeline/pipeline_options.h"

#include "trainers/pipeline/partition.h"
#include "trainers/pipeline/schedule.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::pipeline {

Status validate(const PipelineOptions& o, int batch_size) {
  if (o.stages < 1 || o.stages > 1024)
    return invalid_argument("--stages must be in [1, 1024] (got " + std::to_string(o.stages) + ")");
  if (o.microbatches < 1 || o.microbatches > 65536)
    return invalid_argument("--microbatches must be in [1, 65536] (got " + std::to_string(o.microbatches) + ")");
  auto schedule = parse_schedule(o.schedule);
  if (!schedule.ok()) return schedule.status();
  if (!o.stage_layers.empty()) {
    auto counts = parse_stage_layers(o.stage_layers);
    if (!counts.ok()) return counts.status();
    if (static_cast<int>(counts->size()) != o.stages)
      return invalid_argument("--stage-layers '" + o.stage_layers + "' gives " + std::to_string(counts->size()) +
                              " stages; --stages is " + std::to_string(o.stages) + ": give one count per stage");
  }
  if (o.workers < 0 || (o.workers > 0 && o.workers % o.stages != 0))
    return invalid_argument("--workers " + std::to_string(o.workers) + " is not a multiple of --stages " +
                            std::to_string(o.stages) + ": a pipeline job runs workers / stages replicas of the "
                            "pipeline; use --workers " + std::to_string(o.stages) + " x replicas");
  const int parts = o.replicas() * o.microbatches;
  if (batch_size < 1 || batch_size % parts != 0) {
    return invalid_argument("--batch-size " + std::to_string(batch_size) + " (the global batch) does not divide into " +
                            std::to_string(o.replicas()) + " replica(s) x " + std::to_string(o.microbatches) +
                            " micro-batches; use a multiple of " + std::to_string(parts) + " or other --microbatches");
  }
  return {};
}

Status check_pipeline_model(const TrainOptions& o, const PipelineOptions& po, DataSpec data) {
  auto setup = set_up_trainer(o, data, 0, po.replicas());
  if (!setup.ok()) return setup.status();
  LayerModel* model = setup->trainer->layers();
  if (!model)
    return invalid_argument(setup->where + " does not declare its layers (Trainer::layers() returns null): --strategy pipeline needs a LayerModel "
                            "(trainers/api/trainer.h); train it with --strategy sync");
  if (data.classes <= 0 && !model->scores_values())  // a regression the layers cannot score
    return invalid_argument("a pipeline (--strategy pipeline) scores the last stage's output with the layers' loss, and " +
                            setup->where + "'s layers score class targets only (LayerModel::scores_values()); this "
                            "dataset's target holds values: train it with `troupe train` or a sync job");
  std::vector<int> counts;
  if (!po.stage_layers.empty()) {
    auto parsed = parse_stage_layers(po.stage_layers);
    if (!parsed.ok()) return parsed.status();
    counts = *parsed;
  }
  auto plans = partition_layers(model->layer_infos(), data.features, po.stages, counts);
  return plans.ok() ? Status{} : plans.status().with_context(setup->where);
}

}  // namespace troupe::pipeline
