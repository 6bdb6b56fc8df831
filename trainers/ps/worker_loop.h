// The training loop every parameter-server worker runs, whatever computes its gradients: the CPU
// worker (async_worker.h) hands it a StepDevice around its Trainer, a device worker
// (device_worker.h) its GPU's or a test's. Per step, with clock c = the steps trained so far:
//
//   next batch from the feed, tag = position()
//   upload_batch            the device takes the rows while the host waits in the pull
//   pull(c) into pull_buffer(1 - cur); cur = 1 - cur
//   compute(cur), wait_gradient()
//   push(c, push_buffer(), versions pulled, tag); trained(); clock c + 1
//
// Around the steps it keeps what both workers do the same way: the staleness clock, a central
// job's resumed steps, the replays a restored shard asks for (computed on the last whole pull),
// progress and epoch reports, rank 0's evaluation on freshly pulled (after the last epoch final)
// parameters, and telling the shards this worker finished, on every way out.
#pragma once

#include <string>
#include <vector>

#include "trainers/ps/async_worker.h"
#include "trainers/ps/step_device.h"

namespace troupe::ps {

// Trains worker `worker.rank` on `device` as train_ps_worker documents (its contract and errors),
// once the caller checked the options (check_worker_options) and that the device holds the shards'
// number of parameters. `where` prefixes the errors of the trainer or device ("trainer 'mlp'").
// On success *measured holds the worker's report; on an error it is left partly filled.
Expected<TrainResult> run_worker_loop(StepDevice& device, const std::string& where, const TrainOptions& options,
                                      const Dataset& train, const Dataset& test, BatchFeed& feed,
                                      const PsWorker& worker, const ProgressFn& progress, PsWorkerReport* measured,
                                      std::vector<float>* final_params);

}  // namespace troupe::ps
