// The input pipeline's figures as GCS metrics (gcs/events.h), for the dashboard and
// `troupe submit`'s summary: how long a worker waited for data, and how fast its pipeline made it.
#pragma once

#include "core/ids.h"
#include "gcs/store.h"
#include "data/feed/input_pipeline.h"

namespace troupe::data {

// "job/<job>/worker/<worker>/<name>", the name of a per-worker metric.
std::string worker_metric_name(const JobId& job, const WorkerId& worker, const std::string& name);

// Records data_wait_ms (the consumer's total wait so far) and data_examples_per_s (what the
// producers delivered per second since the start) for `worker`. The runtime calls it at the end
// of each epoch, or every few seconds; errors are the store's, naming the metric.
Status record_data_wait(gcs::Store& store, const JobId& job, const WorkerId& worker, const InputPipelineStats& stats);

}  // namespace troupe::data
