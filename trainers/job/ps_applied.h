// The async job's side of its exactly-once accounting (gcs/async_accounting.h): each parameter
// server writes what its updates were computed from once every worker finished, and rank 0 waits
// for all of them before it records the job's success, so the supervisor's proof finds them.
#pragma once

#include <chrono>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"
#include "trainers/ps/parameter_shard.h"

namespace troupe::job {

// Writes server `index` (attempt `attempt`)'s applied data: `shard`'s record (applied_data.h) and
// whether it was restored from a checkpoint.
Status publish_applied(gcs::Store& store, const JobId& job, int index, int attempt, const ps::ParameterShard& shard);

// Waits until every one of `servers` servers wrote its applied data, up to `timeout`. timeout names
// the servers missing (the accounting will then report them too).
Status wait_for_applied(gcs::Store& store, const JobId& job, int servers, std::chrono::milliseconds timeout);

}  // namespace troupe::job
