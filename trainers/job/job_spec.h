// What a submitted job asks for (JobSpec) and how it travels: as "key=value" settings in the job's
// GCS record (JobRecord::spec), read back by every actor of the job. One table of keys below, so
// the submitter and the workers cannot disagree on a name.
//
//   strategy       sync | async | central | pipeline
//   workers        trainer actors (replicas; pipeline: stage actors, workers / stages replicas);
//                  ps: parameter-server actors (async)
//   stages, microbatches, schedule, stage_layers   pipeline (trainers/pipeline/pipeline_options.h)
//   staleness      async: how many steps a worker may run ahead of the slowest (-1: unbounded)
//   shard_policy   auto | contiguous | stratified | interleaved (auto: stratified when every example
//                  has one class, else interleaved; sync always uses interleaved: see below)
//   library        checksum of the trainer library in the GCS ("" for built-in trainers)
//   model_file_sum checksum of the model's file (torchscript:FILE) in the GCS ("" when none)
//   cpus_per_worker, gpus_per_worker, transport (auto | shm | tcp | hierarchical), checksum_every,
//   collective_timeout_ms, checkpoint_every / checkpoint_dir / checkpoint_keep (sync: sharded
//   checkpoints, trainers/checkpoint/), resume_job / resume_step (a job resumed from another's
//   checkpoint), and every TrainOptions field the CLI sets (model, epochs, batch_size,
//   optimizer, lr, ...), max_restarts / restart_backoff_ms (supervision).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tls/tls_context.h"
#include "trainers/pipeline/pipeline_options.h"
#include "trainers/setup/train_options.h"

namespace troupe::job {

struct JobSpec {
  std::string name;
  std::string strategy = "sync";
  int workers = 1;
  int ps = 0;
  int staleness = -1;
  std::string shard_policy = "auto";
  std::string library;             // checksum; empty: the trainer is built in
  // The xxh64 of the model's file (--model torchscript:FILE) whose bytes the submitter stored in the
  // GCS: workers use the GCS copy where the path does not hold them (trainers/job/job_model_file.h).
  std::string model_file_sum;
  double cpus_per_worker = 1;
  double gpus_per_worker = 0;
  double cpus_per_server = 1;      // each parameter-server actor (async, central)
  std::string transport = "auto";
  int64_t checksum_every = 100;
  // sync: gradient buckets all-reduced while backward runs (0: one all-reduce after backward; -1:
  // auto, buckets of 256 KiB when the node has two cores per worker, so the comm thread has one).
  int64_t bucket_bytes = -1;
  // sync: what gradients travel as: f32, bf16, f16, or auto: the --precision's type (its gradients
  // are already rounded to it, so each worker's contribution crosses the wire unchanged) where the
  // group goes over sockets, f32 over shared memory (there the conversion costs more than the bytes:
  // 4-6% slower on one host, docs/benchmarks.md).
  std::string grad_wire = "auto";
  // sync: what each worker keeps only its 1/N of (trainers/sharded/): none, optimizer (ZeRO stage 1)
  // or gradients (stage 2). Checkpoints keep the unsharded layout either way.
  std::string shard = "none";
  int64_t collective_timeout_ms = 60000;
  // The data plane (collectives' TCP mesh, parameter servers): "auto" = TLS when the cluster runs
  // with TLS (troupe up --tls), "tls" = required, "plain" = TCP even on a TLS cluster (it costs
  // bandwidth: docs/benchmarks.md).
  std::string data_plane = "auto";
  // sync: a checkpoint every this many steps (0: none) under <checkpoint_dir>/<job id>/, of which
  // the newest checkpoint_keep are kept. The directory must be readable by every worker and by the
  // job that resumes (one host, or a shared file system).
  int64_t checkpoint_every = 0;
  std::string checkpoint_dir;
  int checkpoint_keep = 3;
  // A job resumed from job `resume_job`'s checkpoint of step `resume_step` (`troupe submit
  // --resume`; the submitter chose the newest intact one). Empty: a fresh start.
  std::string resume_job;
  int64_t resume_step = 0;
  // pipeline: the model's layers cut into `stages` stages, one per worker; workers / stages
  // replicas of the pipeline (trainers/pipeline/).
  int stages = 0;
  int microbatches = 4;
  std::string schedule = "1f1b";
  std::string stage_layers;
  // Supervision: how often the job supervisor restarts the job's actors after a failure (a worker
  // or server killed, its node lost, an exception) before it fails the job, and the wait before
  // the first restart (doubled for each further one, at most 30 s). sync: every worker restarts
  // from the job's newest intact checkpoint (fixed size); async: the failed actor is replaced.
  int max_restarts = 3;
  int64_t restart_backoff_ms = 200;
  // Where a restart places what it restarts: "any" node with room, the "same" node each actor ran
  // on (when that node is still there), or an "other" node than the failed actor's.
  std::string restart_on = "any";
  // sync and central: a job whose step count stands still this long is restarted as stuck (0: never).
  int64_t progress_timeout_ms = 120000;
  // sync: after a failure the gang restarts at as many workers as fit (at least 1, at most
  // `workers`) instead of waiting for room for all; each worker then trains several of the epoch's
  // `workers` shards, weighted so a step's update is the full-size one, and the job grows back to
  // `workers` right after a checkpoint once there is room again (actors/job_supervisor.h).
  bool elastic = false;
  // After a worker is lost: "live" (the survivors keep training state in memory, the lost worker is
  // replaced and takes it from them; no completed step is lost: trainers/job/live_recovery.h),
  // "checkpoint" (every worker restarts from the newest checkpoint) or "auto" (live where it is
  // built: CPU sync jobs, sharded, elastic or both, and pipelines (a lost stage from the
  // same stage of another replica, or its buddy stage's mirror: trainers/job/pipeline_live.h); else
  // checkpoint).
  std::string recovery = "auto";
  // A live --shard job: every rank mirrors its buddy's chunks every this many steps
  // (trainers/sharded/buddy_mirror.h); a one-replica pipeline: each stage its state to its buddy
  // stage (trainers/pipeline/stage_mirror.h). A loss rolls back in memory to the newest whole round.
  int64_t mirror_every = 1;
  // Whether a mirror round's send overlaps the next step (a thread and a second group of the same
  // ranks) or runs after the step: "on", "off", or "auto" — on where the host has two hardware
  // threads per worker (as gradient buckets), else off (with ranks outnumbering cores there is no
  // idle core to overlap on: measured in docs/benchmarks.md).
  std::string mirror_overlap = "auto";
  TrainOptions train;
};

// Whether `spec`'s job recovers live (see JobSpec::recovery).
bool recovers_live(const JobSpec& spec);
// Whether a live sharded job's mirror rounds overlap the steps here (JobSpec::mirror_overlap).
bool mirror_overlaps(const JobSpec& spec);

// invalid_argument naming the first bad field: an unknown strategy, workers < 1, async without
// parameter servers (or servers for another strategy), a global batch that does not divide among
// the workers, pipeline settings that do not fit (pipeline::validate: workers not a multiple of
// stages, micro-batches that do not divide the batch, ...), and TrainOptions::validate's refusals.
Status validate(const JobSpec& spec);

// The bucket size a sync worker uses: spec.bucket_bytes, or for -1 256 KiB when this machine has at
// least two hardware threads per worker of the job (or the gradients are sharded: their memory is
// given back bucket by bucket), else 0 (measured: on 2 cores, 2 worker
// processes with comm threads train at 0.87x the speed of one all-reduce; docs/benchmarks.md).
int64_t effective_bucket_bytes(const JobSpec& spec);

// The wire a sync worker's gradients use over a group of `transport` kind (Transport::kind()):
// spec.grad_wire, or for "auto" the precision's type unless the group is shared memory.
DType effective_grad_wire(const JobSpec& spec, const std::string& transport);

// A pipeline job's settings as trainers/pipeline/ takes them.
pipeline::PipelineOptions pipeline_options(const JobSpec& spec);

std::vector<std::string> to_settings(const JobSpec& spec);
// corrupt_data naming the item for an item that is not key=value or whose value does not parse;
// unknown keys are refused too (a newer submitter), naming them.
Expected<JobSpec> from_settings(const std::vector<std::string>& settings);

// The TLS the job's data plane connections use: the cluster's (tls/tls_context.h process_tls) unless
// the spec says "plain"; null for plain TCP. invalid_argument when the job asks for "tls" on a
// cluster without it.
Expected<std::shared_ptr<const tls::TlsContext>> data_plane_tls(const JobSpec& spec);

}  // namespace troupe::job
