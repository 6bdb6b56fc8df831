// The step timelines of a job's workers (sync, async, central) in the GCS: where each worker's
// steps spent their time (waiting for data, forward+backward, communication, optimizer), kept per (job, rank) on a
// bounded stream, plus each worker's live phase in a table. trainers/job writes them
// (step_timeline_publisher.h); `troupe timeline JOB` and the dashboard read them
// (gcs/timeline_view.h turns them into a Chrome trace and finds stragglers and stuck ranks).
//
//   stream "timeline/<job hex>/<rank>"   entries: a chunk of consecutive StepSamples of one rank
//                                        (one entry per flush), about kTimelineChunks newest kept
//   table  "timeline_live", key "<job hex>/<rank>"   the rank's WorkerLive, rewritten every flush
//   stream "timeline/<job hex>/loss"     the loss curve: one LossPoint per flush of rank 0 (the mean
//                                        loss of the steps flushed), about kLossCurvePoints kept
//
// Records are msgpack with the schema version first, like every GCS record (gcs/records.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

// Stream entries kept per rank: the newest ~100 s of steps (a flush every 500 ms). An entry is
// ~45 bytes a step, so a rank's stream stays under 200 x 512 x 45 B = 4.6 MB (~1.5 MB for the
// MLP's ~170 steps per flush here); it is kept after the job ends, like the job's record.
constexpr size_t kTimelineChunks = 200;
constexpr size_t kTimelineChunkSteps = 512;      // most steps in one entry
constexpr size_t kTimelineMaxSteps = 20000;      // most steps a reader asks for per rank
constexpr const char* kTimelineLiveTable = "timeline_live";
constexpr size_t kLossCurvePoints = 4000;        // loss curve points kept per job (2 a second)

// One step of one worker. Times in microseconds; start_us is wall clock (since the epoch), so
// workers on one host line up exactly and hosts as well as their clocks agree.
struct StepSample {
  int epoch = 0;
  int64_t step = 0;          // steps done in the job, counting this one (1-based)
  int64_t start_us = 0;
  int64_t data_us = 0;       // waiting for the batch (the input pipeline)
  int64_t compute_us = 0;    // forward + backward
  int64_t comm_us = 0;       // waiting for the gradient all-reduce after backward (exposed); a
                             // parameter-server worker's pull
  int64_t optimizer_us = 0;  // the update and the data bookkeeping after it; a parameter-server
                             // worker's push (the servers apply it)
  int64_t comm_busy_us = 0;  // all-reduce time on the comm thread, overlapping backward (buckets)
  int64_t samples = 0;       // examples this worker trained in the step
  double loss = 0;           // the step's loss: sync, averaged over the workers (the same on every
                             // rank); a parameter-server worker's, its own batch's
  int64_t comm_bytes = 0;    // bytes the step's collectives carried (Communicator::payload_bytes: the
                             // gradients at their wire type, gathers); 0 for parameter-server workers
  int64_t end_us() const { return start_us + data_us + compute_us + comm_us + optimizer_us; }
};

// What a worker is doing now.
struct WorkerLive {
  int rank = 0;
  std::string phase;         // "data_wait", "forward_backward", "communication", "optimizer", "idle", "done"
  int64_t phase_since_ms = 0;  // wall clock
  int epoch = 0;
  int64_t step = 0;          // the step in progress (or the last one)
  int64_t updated_ms = 0;    // when the worker wrote this
};

// A point of a job's loss curve: the mean loss of the steps up to `step` since the previous point.
struct LossPoint {
  int64_t step = 0;
  double loss = 0;
  int64_t time_ms = 0;
};

std::string timeline_stream(const std::string& job_hex, int rank);  // "timeline/<job>/<rank>"
std::string loss_curve_stream(const std::string& job_hex);          // "timeline/<job>/loss"

std::string encode_steps(const std::vector<StepSample>& steps);
Status decode_steps(const std::string& bytes, std::vector<StepSample>* out);
std::string encode_live(const WorkerLive& w);
Status decode_live(const std::string& bytes, WorkerLive* out);

// Appends `steps` (chunks of at most kTimelineChunkSteps) to the rank's stream.
Status append_steps(Store& store, const std::string& job_hex, int rank, const std::vector<StepSample>& steps);
// The rank's newest `max_steps` steps (at most kTimelineMaxSteps), oldest first.
Expected<std::vector<StepSample>> read_steps(Store& store, const std::string& job_hex, int rank, size_t max_steps);

Status append_loss_point(Store& store, const std::string& job_hex, const LossPoint& p);
// The newest `max_points` points (at most kLossCurvePoints), oldest first.
Expected<std::vector<LossPoint>> read_loss_curve(Store& store, const std::string& job_hex, size_t max_points);

Status put_live(Store& store, const std::string& job_hex, const WorkerLive& w);
// nullopt when the rank never wrote one.
Expected<std::optional<WorkerLive>> read_live(Store& store, const std::string& job_hex, int rank);

}  // namespace troupe::gcs
