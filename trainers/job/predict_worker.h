// The body of a prediction job's predictor actors ("troupe.predictor", trainers/job/job_actors.h),
// run on a thread of their own inside a node process:
//
//   read the job's spec (predict_spec.h) -> load the model once and open (map) the data on this
//   node -> record the ledger's one epoch of contiguous shards (idempotent: every predictor cuts the
//   same) -> a replacement gives back what its dead predecessor of the same slot held ->
//   claim a shard -> predict its rows -> its part file (temp + fsync + rename) -> its PredictedPart
//   record (gcs/predict_accounting.h) -> complete it in the ledger -> the job's progress -> claim
//   the next, until none is left.
//
// Predictor 0 then assembles: it keeps claiming shards given back meanwhile and waits until every
// shard is DONE (a shard held by a dead predictor comes back when the supervisor's replacement
// starts), copies the parts in shard order — input order — into the --out .npy, each checked
// against its recorded checksum, writes it durably, removes the parts and records SUCCEEDED with
// the summary. Why predictor 0 and not the submitter or the head: the job then ends complete with
// --detach too (nobody need wait), the bulk bytes stay off the head's control plane, and a
// predictor 0 killed while assembling is replaced like any predictor and its replacement assembles
// again (the parts stay until the output is written). The parts must be readable where predictor
// 0 runs: one host, or a shared file system.
#pragma once

#include <atomic>

#include "actors/node_environment.h"
#include "core/status.h"
#include "trainers/job/job_worker.h"

namespace troupe::job {

constexpr const char* kPredictorActorType = "troupe.predictor";

// Runs predictor `args.index` of the job until its part is done, it fails, or `cancel` is set.
Status run_predictor(const actors::NodeEnvironment& env, const MemberArgs& args, const std::atomic<bool>& cancel);

}  // namespace troupe::job
