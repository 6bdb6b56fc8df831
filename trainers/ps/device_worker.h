// An async job's worker whose gradients a StepDevice computes (step_device.h; a GPU's through
// trainers/cuda/cuda_ps_worker.h): the loop the CPU worker (async_worker.h) runs too (worker_loop.h),
// with the same clocks, staleness waits, data tags, accounting, replays and evaluation, step for
// step, the device's work queued so that it starts as soon as its inputs are there:
//
//   host thread                               device (copy stream | compute stream)
//   batch k from the feed, tag = position()
//   upload_batch(k)   ----------------------> copy: rows -> device      (runs during the pull)
//   pull(k) into pull_buffer(1 - cur)         (the device's pinned memory, no staging copy)
//   cur = 1 - cur; compute(cur) ------------> copy: parameters -> device; compute waits for them
//                                             (event), forward/backward; copy waits for it
//                                             (event), gradient + loss -> push_buffer()
//   wait_gradient()   <---------------------- (bounded)
//   push(k, push_buffer(), versions, tag)     (straight from pinned memory)
//   trained(), clock k + 1
//
// Why the pull of k + 1 does not start before the push of k (it would overlap more): the CPU worker
// pulls k + 1 after its push of k, so its parameters include its own last update, and the
// staleness bound counts from there; with --staleness 0 a pull for k + 1 before the push of k
// waits for this very worker and times out. The feed's order is fixed too: trained() for batch k
// comes before next() for k + 1 (batch_feed.h). What overlaps is what these rules leave: the
// batch's upload with the pull, and the device's three stages with each other through events (no
// host round trip between the parameters landing and the forward pass, or between the backward
// and the gradient's download).
//
// Two parameter slots alternate (a pull that fails halfway leaves the last whole pull, on which a
// replay computes, as the CPU worker's two buffers). Async mode only (central keeps CPU workers):
// PsWorker::start_step and whole_global_batches must be unset.
#pragma once

#include <vector>

#include "trainers/ps/async_worker.h"
#include "trainers/ps/step_device.h"

namespace troupe::ps {

// Trains worker `worker.rank` as train_ps_worker does (its contract, errors and report), the
// gradients computed by `device`, whose parameters() must be the shards'. Besides
// check_worker_options's refusals: invalid_argument for a central-mode client or PsWorker fields
// of central jobs, for --accumulate > 1 (a device computes one batch per step), and the device's
// errors naming the step.
Expected<TrainResult> train_ps_worker_on(StepDevice& device, const TrainOptions& options, const Dataset& train,
                                         const Dataset& test, BatchFeed& feed, const PsWorker& worker,
                                         const ProgressFn& progress = {}, PsWorkerReport* report = nullptr,
                                         std::vector<float>* final_params = nullptr);

}  // namespace troupe::ps
