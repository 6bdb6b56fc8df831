#include "trainers/pipeline/pipeline_options.h"

#include "trainers/pipeline/partition.h"
#include "trainers/pipeline/schedule.h"

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

}  // namespace troupe::pipeline
