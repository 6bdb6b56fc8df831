// The training loop of one worker of a parameter-server job, for the `async` and `central`
// strategies (which one is the shards' mode, parameter_shard.h). Per step, with clock c = the
// steps this worker trained so far:
//
//   pull(c) -> the whole parameter vector, after the shards' wait (async: no worker more than S
//              steps behind; central: clock c - 1's averaged update applied)
//   forward_backward on the feed's next batch (global batch / workers rows)
//   push(c, gradients, versions pulled) -> async: applied at once; central: averaged with the
//              other workers' pushes of c and applied once
//
// The trainer is built and set up exactly as train_replica does (trainer_setup.h). Rank 0
// evaluates test accuracy after each epoch on freshly pulled parameters, and after the last on the
// final ones (once every worker finished). How a job drives a worker:
//
//   auto client = connect_ps(shard_addresses, {job_id, rank});
//   SliceFeed feed(train, options.seed, options.batch_size, rank, workers);   // or a LedgerFeed
//   PsWorkerReport report;
//   auto result = train_ps_worker(options, train, test, feed, {client->get(), rank, workers}, progress, &report);
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "data/feed/batch_feed.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/ps/ps_client.h"
#include "trainers/ps/staleness.h"
#include "trainers/setup/train_options.h"

namespace troupe {
class StepRecorder;  // trainers/report/step_timeline.h
}

namespace troupe::ps {

struct PsWorker {
  PsClient* client = nullptr;
  int rank = 0;
  int workers = 1;
  bool evaluate = true;  // rank 0 measures test accuracy (the others never do)
  // At most (training examples / global batch) steps per epoch, like sync: for lockstep (central)
  // workers fed one shard each. Async workers train until their feed ends (they take shards as
  // they get to them, so a fast one trains more than its share).
  bool whole_global_batches = false;
  // A central job resumed from its checkpoint of this step (the shards restored to it): the
  // worker's clock starts here, and the checkpoint's epoch goes on after its steps already done,
  // whose batches are drawn and marked trained without training (as train_replica does).
  int64_t start_step = 0;
  // An async worker that replaces a failed one of its rank: its clock goes on from here (the
  // client's start_clock), its epochs from the first (it trains what is left of them).
  int64_t start_clock = 0;
  // Async with checkpoints: once finished, wait until every worker finished (the final pull), so a
  // parameter server restored meanwhile still gets this worker's replays (ps_client.h).
  bool wait_for_all = false;
  // An async job resumed from another job's checkpoint: the epochs before this one were trained
  // (trainers/job/ps_resume.h).
  int first_epoch = 1;
  // The step timeline (trainers/report/step_timeline.h), if given: each step's data wait, then its pull
  // (recorded as `communication`: the shards' staleness wait included), forward/backward, and its
  // push (recorded as `optimizer`: the servers apply the update).
  StepRecorder* steps = nullptr;
};

// What a worker measured besides its TrainResult.
struct PsWorkerReport {
  StalenessStats staleness;  // every update the shards applied up to this worker's end
  double pull_ms = 0;        // time in pulls (the shards' waits included)
  double push_ms = 0;
  double compute_ms = 0;     // forward_backward
  int64_t steps = 0;
};

// Trains worker `worker.rank` until the feed's epochs (or options.max_steps) are done, then tells
// the shards it finished. While it trains, the client's replay function (ps_client.h) recomputes a
// push from its tag with this worker's trainer, on its current parameters, with the rows the feed
// names (BatchFeed::rows_of). The TrainResult is this worker's: its batches' loss and accuracy, its
// own samples/s (sum over workers for the job's); test accuracy on rank 0 only (-1 elsewhere).
// `final_params` (if given) receives the parameters once every worker finished (rank 0: those it
// evaluated last). With options.save_path (--save) rank 0 writes them as a model file
// (trainers/setup/model_file.h), its folder checked before the first step. On an error the
// worker also tells the shards it finished, so the others are not held up. Errors:
// invalid_argument (bad options, a global batch that does not divide among the workers x
// --accumulate micro-batches, shards holding another number of parameters than the trainer declares),
// numeric_error (a loss no longer finite), the client's errors (a shard down, a wait timed out).
Expected<TrainResult> train_ps_worker(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                      BatchFeed& feed, const PsWorker& worker, const ProgressFn& progress = {},
                                      PsWorkerReport* report = nullptr, std::vector<float>* final_params = nullptr);

}  // namespace troupe::ps
