// The runtime side of the trainer API for a job in this process (the `local` strategy on the CPU):
// it builds the trainer registered as TrainOptions::model, owns its flat parameter and gradient
// buffers, initialises them from the seed, batches shuffled data, applies the optimizer and
// learning-rate schedule, evaluates on the test split and reports progress. The trainer only
// computes losses and gradients (trainers/api/trainer.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/communicator.h"
#include "trainers/api/trainer.h"
#include "data/feed/batch_feed.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/checkpoint/collective_write.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/sync/grad_buckets.h"
#include "trainers/sync/held_state.h"
#include "trainers/sharded/sharded_state.h"
#include "trainers/report/step_timeline.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// Fills `params` (space.size() floats) block by block in declaration order from one mt19937_64
// seeded with `seed`: the same on every replica, and for the MLP the same as mlp_init.
void init_parameters(const ParameterSpace& space, uint64_t seed, float* params);

// The trainer's settings for a job: TrainOptions::trainer_args and runtime_args, plus "hidden" from
// --hidden when the args do not set it. invalid_argument for an arg that is not key=value.
Expected<JobConfig> trainer_config(const TrainOptions& options);

// Runs the whole job on the CPU. `final_params` (if given) receives the trained parameters. Errors:
// invalid_argument (bad options, unknown trainer, a setup() error), numeric_error (a loss that is no
// longer finite, naming the epoch and step), or a trainer's own error with where it happened.
Expected<TrainResult> train_with_trainer(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                         const ProgressFn& progress = {}, std::vector<float>* final_params = nullptr);

// One replica of a synchronous data-parallel job (the `sync` strategy): `comm` joins the job's
// replicas. Each takes its own rows of every global batch (options.batch_size / replicas of them:
// rank r the r-th slice), all-reduces the gradient (averaged) together with its loss, and applies
// the same update, so every replica holds the same parameters — the same, up to rounding, as one
// process training on the global batch. Every `checksum_every` steps (0: never) the replicas
// compare a checksum of their parameters and all stop with an error naming a replica that differs.
struct Replica {
  collectives::Communicator* comm = nullptr;  // null: a job of one replica
  // Where this replica's batches come from (each of options.batch_size / replicas examples); null:
  // a SliceFeed, this replica's rows of every global batch of the seeded shuffle. A feed that runs
  // out early ends the epoch for every replica (the first to end tells the others through the
  // step's all-reduce).
  BatchFeed* feed = nullptr;
  int64_t checksum_every = 100;
  std::chrono::milliseconds timeout{60000};   // per collective
  // Set (from any thread) to stop before the next step: the call then returns
  // unavailable("stopped at epoch E, step S").
  const std::atomic<bool>* cancel = nullptr;
  // Gradients are all-reduced in buckets of about this many bytes by a communication thread, each
  // as soon as the trainer announces its blocks ready (Gradients::ready), overlapping backward
  // (trainers/sync/grad_buckets.h). 0: one all-reduce of everything after forward_backward. With
  // TrainOptions::accumulate > 1 the buckets start only after the last micro-batch (no overlap).
  size_t bucket_bytes = kDefaultBucketBytes;
  // What the gradients travel as (`--grad-wire`): f32, or bf16 / f16 (half the bytes; partial sums
  // are rounded to it on the wire, accumulation stays f32). The loss and count slots stay f32.
  DType grad_wire = DType::f32;
  GradBucketStats* bucket_stats = nullptr;  // if set, receives the buckets' timings after training
  // If set, every step's phases (data wait, forward+backward, communication, optimizer) are
  // recorded there (trainers/report/step_timeline.h; the job layer publishes them).
  StepRecorder* steps = nullptr;

  // Checkpoints (trainers/checkpoint/). Every `checkpoints.every` steps (0: never), right after the
  // step's update (every replica holds the same parameters: the all-reduce is the step barrier),
  // replica r of N writes shard r of N — its 1/N slice of the parameters and of the optimizer
  // state — under checkpoint::step_dir(checkpoints.dir, step), all in parallel. The replicas then
  // all-gather each shard's size and checksum (the barrier after which every shard is durable), and
  // rank 0 hands the manifest to `checkpoints.commit` (the job layer records it in the GCS). A
  // replica that fails to write fails the step on every replica, naming it. The directory must be
  // one every replica (and a resumed job) can read: one host, or a shared file system.
  checkpoint::ReplicaCheckpoints checkpoints;
  // Start from a checkpoint instead of the seed's parameters: its parameters, optimizer state and
  // step; the epoch it was taken in goes on after its `epoch_step` steps (the feed's batches of
  // those steps are drawn and marked trained without training them, so every replica skips the
  // same global batches and the data order is the uninterrupted run's). Null: a fresh start.
  const checkpoint::TrainingState* resume = nullptr;
  // A sharded replica (`shard` below) may be given, with `resume` holding only the step and epoch,
  // what reads its own ranges of that checkpoint (checkpoint::load_ranges): the parameters' ranges
  // (its chunks under --shard parameters, else the whole model) and its chunks of the optimizer
  // state — so no replica ever holds the whole checkpoint.
  std::function<Expected<checkpoint::TrainingState>(size_t total, const std::vector<checkpoint::Range>& params,
                                                    const std::vector<checkpoint::Range>& optimizer)>
      resume_ranges;
  // Elastic (a sync job running with fewer replicas than it has shards): this replica's rows of every
  // global batch, which may differ between replicas (the feed's batches must have this many). Its
  // gradient and loss are weighted by local_rows x replicas / batch_size before the averaging
  // all-reduce, so the group applies the mean over the whole global batch, as at full size (with
  // --accumulate K, in K micro-batches of local_rows / K). 0: the even split, batch_size / replicas each.
  int local_rows = 0;
  // Sharded data parallelism (`--shard`, trainers/sharded/sharded_state.h): `optimizer` keeps and
  // updates only this replica's 1/N of the optimizer state (gradients reduce-scattered per bucket,
  // parameters all-gathered after the update); `gradients` also gives back each bucket's gradient
  // pages outside its chunk once reduced. Checkpoints keep the unsharded layout (shard r = slice r),
  // so a job resumes from them with any --shard and any number of replicas. none: all-reduce.
  ShardStage shard = ShardStage::none;
  ShardStats* shard_stats = nullptr;  // if set (and sharded), receives what the replica held, measured
  // Live recovery (trainers/job/live_recovery.h): when set, a step whose gradient all-reduce fails
  // (a peer lost) leaves the replica's state as of the last completed step here before the error
  // is returned, so the job layer can go on from memory. A sharded replica keeps a buddy mirror
  // instead (trainers/sharded/buddy_mirror.h), a round every `mirror_every` steps, and leaves its
  // rounds here when a peer is lost.
  HeldState* held = nullptr;
  int64_t mirror_every = 1;
  int mirror_distance = 1;  // rank r mirrors r - mirror_distance's chunks (choose_buddy_distance)
  // A second group of the same ranks for the mirror's shifts, overlapped with the next step (null:
  // in line on `comm`, after the step).
  collectives::Communicator* mirror_comm = nullptr;
  // A sharded replica's start from the buddy mirrors' round of step `mirror.step` (>= 0; every rank
  // of the group alike; `mirror.hold` this rank's rounds, empty for a replacement) instead of `resume`.
  MirrorResume mirror;
  // If set, the steps completed so far, updated after every step (what a failed run got through).
  int64_t* steps_done = nullptr;
};

// train_with_trainer for one replica. Errors as above, plus invalid_argument when the global batch
// does not divide among the replicas, and the collectives' errors (a replica that died or diverged,
// naming it). Test accuracy is computed over all replicas (each evaluates a slice).
Expected<TrainResult> train_replica(const TrainOptions& options, const Dataset& train, const Dataset& test,
                                    const Replica& replica, const ProgressFn& progress = {},
                                    std::vector<float>* final_params = nullptr);

}  // namespace troupe
