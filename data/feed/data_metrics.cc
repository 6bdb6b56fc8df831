#include "data/feed/data_metrics.h"

#include "gcs/events.h"

namespace troupe::data {

std::string worker_metric_name(const JobId& job, const WorkerId& worker, const std::string& name) {
  return "job/" + job.hex() + "/worker/" + worker.hex() + "/" + name;
}

Status record_data_wait(gcs::Store& store, const JobId& job, const WorkerId& worker, const InputPipelineStats& stats) {
  const int64_t now = gcs::now_ms();
  TROUPE_RETURN_IF_ERROR(gcs::record_metric(store, {now, worker_metric_name(job, worker, "data_wait_ms"), stats.wait_ms}));
  return gcs::record_metric(store, {now, worker_metric_name(job, worker, "data_examples_per_s"), stats.examples_per_s()});
}

}  // namespace troupe::data
