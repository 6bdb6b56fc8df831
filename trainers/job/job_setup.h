// What every actor of a job does first: connect to the GCS, read the job's spec from its record,
// fetch and load its trainer library (if any), and load the dataset from this node's disk (once per
// node process).
#pragma once

#include <memory>

#include "actors/node_environment.h"
#include "core/ids.h"
#include "gcs/redis_store.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/job/job_spec.h"

namespace troupe::job {

struct JobSetup {
  std::unique_ptr<gcs::RedisStore> store;
  JobSpec spec;
  // The node process's decoded splits (data/dataset_cache.h), shared with its other job actors
  // and never copied.
  std::shared_ptr<const Dataset> train_set, test_set;
  const Dataset& train() const { return *train_set; }
  const Dataset& test() const { return *test_set; }
};

// Errors name what failed: the GCS, the job's record or spec, the library (not found, another
// troupe version), the dataset on node N.
Expected<JobSetup> prepare(const actors::NodeEnvironment& env, const JobId& job);

}  // namespace troupe::job
