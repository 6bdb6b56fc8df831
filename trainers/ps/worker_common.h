// What the parameter-server workers (async_worker.h on the CPU, device_worker.h on a StepDevice)
// do the same way besides their loop (worker_loop.h): check their options, tell the shards when they
// cannot start, and wait at the end for every worker to finish.
#pragma once

#include "core/status.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/ps/async_worker.h"
#include "trainers/setup/train_options.h"

namespace troupe::ps {

// invalid_argument for options no parameter-server worker trains: bad TrainOptions, no client, a
// rank outside the workers, a global batch that does not divide among the workers (x --accumulate
// micro-batches) or is larger than the training split. On a refusal the shards are told this
// worker finished (finish_on_error), so no other worker waits for it.
Status check_worker_options(const TrainOptions& options, const Dataset& train, const PsWorker& worker);

// Returns `st`; when it is an error, first tells the shards this worker finished (ignoring how that
// goes), so no other worker waits for one that cannot train.
Status finish_on_error(PsClient& client, Status st);

// Waits in final pulls until every worker finished: a shard restored meanwhile still gets this
// worker's replays. A shard's wait is bounded (its timeout), so it is asked again while the others
// still train, up to 10 minutes. Its training is done either way: a wait that ends otherwise is
// logged, not an error of the worker (only its replays to a later restored shard are lost then).
void wait_for_all_workers(PsClient& client, int rank);

}  // namespace troupe::ps
