#include "trainers/job/job_worker.h"

#include <sys/statvfs.h>

#include <optional>

#include <spdlog/spdlog.h>

#include "collectives/group_rendezvous.h"
#include "gcs/group_plan.h"
#include "gcs/job_recovery.h"
#include "trainers/sync/grad_buckets.h"
#include "trainers/job/gpu_worker.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_report.h"
#include "trainers/job/job_setup.h"
#include "trainers/job/job_spec.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/job/live_recovery.h"
#include "trainers/job/pipeline_worker.h"
#include "trainers/job/ps_member.h"
#include "trainers/job/step_timeline_publisher.h"
#include "trainers/job/sync_recovery.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::job {
namespace {

// Plain sync replicas keep their gradients in the group's shared-memory arena (train_replica), so
// the all-reduces copy nothing in or out; form_group makes one only when the group is shm (every
// worker on this node). Asked for when the ranks' arenas together take at most a quarter of
// /dev/shm (its size, the same for every rank on the node, so all ask alike); 0 otherwise (the
// staged path), or when the trainer cannot be set up here (train_replica then says why).
size_t gradient_arena_bytes(const JobSpec& spec, const Dataset& train, int rank, int world) {
  auto setup = set_up_trainer(spec.train, train.spec(), rank, world);
  if (!setup.ok()) return 0;
  const size_t bytes = (setup->space.size() + 2) * sizeof(float);
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return 0;
  const double shm = static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_frsize);
  if (static_cast<double>(bytes) * world > shm / 4) {
    if (rank == 0)
      spdlog::info("gradients stay out of the shared-memory arena: {} ranks x {} bytes is over a quarter of /dev/shm "
                   "({:.0f} MB)", world, bytes, shm / 1e6);
    return 0;
  }
  return bytes;
}

// Where generation `gen` of a sync job starts, agreed by every rank of `comm`: a live job's state
// from the memory of the rank holding the newest step (trainers/job/live_recovery.h), rank 0 then
// rewinding the ledger to it; else (nobody holds one, or the job recovers from checkpoints) the
// newest checkpoint or the beginning, rewound after a restart (trainers/job/sync_recovery.h).
Expected<StartPoint> start_generation(const JobSpec& spec, JobSetup& s, const MemberArgs& a, int64_t gen,
                                      collectives::Communicator& comm, int64_t steps_per_epoch, HeldState* held) {
  const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  const bool sharded = spec.shard != "none";
  if (held) {
    auto live = sharded ? agree_mirror_step(comm, &held->mirror, timeout) : share_held_state(comm, held, timeout);
    if (!live.ok()) return live.status();
    held->held = false;  // handed on: a later failure outside a step must not go back to it
    if (live->live) {
      if (comm.rank() == 0)
        TROUPE_RETURN_IF_ERROR(rewind_live(*s.store, a.job, spec.workers, steps_per_epoch, gen, *live));
      collectives::CollectiveOptions co;
      co.timeout = timeout;
      TROUPE_RETURN_IF_ERROR(comm.barrier(co).with_context("waiting for rank 0 to rewind to the live state"));
      StartPoint start;
      start.own = true;
      start.source = live_source(*live);
      if (sharded) {  // each replica restores its shard when it starts
        start.mirror_step = live->state.step;
        start.mirror_distance = live->distance;
        start.mirror_world = live->from_world;
      }
      start.state = std::move(live->state);
      return start;
    }
  }
  return start_sync_attempt(*s.store, spec, a.job, static_cast<int>(gen), spec.workers, steps_per_epoch, comm,
                            timeout, sharded);
}

// Rank 0's summary of a finished sync job, recorded as its result.
Status record_sync_result(const JobSpec& spec, JobSetup& s, const MemberArgs& a, int64_t gen, const TrainResult& result,
                          const Replica& replica, const collectives::GroupOptions& go, collectives::Communicator& comm,
                          const std::vector<float>& rates, const StartPoint& start, int64_t last_checkpoint,
                          int64_t steps_per_epoch, int world, const GradBucketStats& buckets,
                          const ShardStats& shard_stats) {
  nlohmann::json summary = sync_summary(result, spec, a.job, static_cast<int>(gen), steps_per_epoch, spec.workers);
  if (spec.elastic) summary["final_workers"] = world;  // the size the last attempt ran at
  summary["worker_samples_per_second"] = rates;
  summary["bucket_bytes"] = effective_bucket_bytes(spec);
  summary["grad_wire"] = dtype_name(replica.grad_wire);
  summary["shard"] = spec.shard;
  if (replica.shard != ShardStage::none) summary["sharded_state_bytes"] = shard_stats.total();
  summary["transport"] = comm.transport().kind();
  summary["gradients_in_arena"] = go.shared_buffer_bytes > 0 && comm.shared_buffer(go.shared_buffer_bytes) != nullptr;
  summary["communication_seconds"] = buckets.comm_seconds;
  summary["communication_hidden_fraction"] = buckets.hidden_fraction();
  add_start_and_checkpoints(&summary, spec, a.job, start, last_checkpoint, replica.checkpoints.dir);
  add_recovery(&summary, *s.store, a.job, recovers_live(spec) ? "live" : "checkpoint");
  return record_success(*s.store, a.job, summary, result.test_accuracy);
}

// One generation of a sync worker: the group "job-<id>" formed at `gen`, its start agreed, the
// replica trained. Live jobs pass `held` (the state kept when a step's all-reduce fails) and
// `superseded` (set to a newer generation when the replacements went there while this one formed).
Status train_generation(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s,
                        const std::atomic<bool>& cancel, int64_t gen, HeldState* held, int64_t* superseded) {
  const JobSpec& spec = s.spec;
  // The ledger keeps spec.workers shards per epoch at any size; an elastic job running smaller gives
  // each worker several (shards_of).
  const int shards = spec.workers;
  const int world = a.world > 0 ? std::min(a.world, shards) : shards;
  ShardStage shard = ShardStage::none;
  parse_shard_stage(spec.shard, &shard);  // validated
  collectives::GroupOptions go = sync_group_options(env, a, spec.transport, world, gen);
  go.superseded_by = superseded;
  // Live: a replacement may wait for survivors still blocked in the broken collective (a cut link is
  // noticed only at its deadline), so registration outlasts the collective timeout.
  if (held) go.timeout = std::max(go.timeout, std::chrono::milliseconds(spec.collective_timeout_ms + 30000));
  if (shard == ShardStage::none && world > 1) go.shared_buffer_bytes = gradient_arena_bytes(spec, s.train(), a.index, world);
  auto tls = data_plane_tls(spec);
  if (!tls.ok()) return tls.status();
  go.tls = *tls;
  auto comm = collectives::form_group(*s.store, go);
  if (!comm.ok()) return comm.status().with_context("forming the job's collective group");
  auto interruptible = a.interrupts ? a.interrupts->add(&(*comm)->transport()) : Interrupts::Registration{};
  std::optional<GenerationWatch> watch;  // live: a replaced peer makes this worker leave its step
  if (held) watch.emplace(*s.store, go.name, gen, &(*comm)->transport());
  // A live sharded job's buddy mirror shifts over a second group of the same ranks, beside the steps.
  std::unique_ptr<collectives::Communicator> mirror_comm;
  Interrupts::Registration mirror_interruptible;
  std::optional<GenerationWatch> mirror_watch;
  if (held && shard != ShardStage::none && world > 1 && mirror_overlaps(spec)) {
    collectives::GroupOptions mo = go;
    mo.name = go.name + "-mirror";
    mo.shared_buffer_bytes = 0;
    auto formed = collectives::form_group(*s.store, mo);
    if (!formed.ok()) return formed.status().with_context("forming the buddy mirror's group");
    mirror_comm = std::move(*formed);
    if (a.interrupts) mirror_interruptible = a.interrupts->add(&mirror_comm->transport());
    mirror_watch.emplace(*s.store, go.name, gen, &mirror_comm->transport());
  }
  const int64_t steps_per_epoch = epoch_steps(s.train().count, spec.train.batch_size, spec.train.pads_last_batch());
  auto start = start_generation(spec, s, a, gen, **comm, steps_per_epoch, held);
  if (!start.ok()) return start.status();
  const int64_t first_step = start->state ? start->state->step : 0;
  TrainedLog trained(*s.store, a.job, static_cast<int>(gen), steps_per_epoch, first_step);

  LedgerFeedOptions fo = sync_feed_options(spec.train.seed, spec.train.batch_size, shards, a.index, world);
  fo.keep_partial = spec.train.pads_last_batch();  // the epoch's short last step (--last-batch pad)
  LedgerFeed feed(s.train(), *s.store, a.job, WorkerId::random(), fo);

  Replica replica;
  replica.comm = comm->get();
  replica.feed = &feed;
  if (world != shards) replica.local_rows = static_cast<int>(fo.shards_per_step * fo.batch_size);
  replica.checksum_every = spec.checksum_every;
  replica.timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  replica.cancel = &cancel;
  replica.bucket_bytes = static_cast<size_t>(effective_bucket_bytes(spec));
  replica.grad_wire = effective_grad_wire(spec, (*comm)->transport().kind());
  replica.shard = shard;
  replica.held = held;
  replica.mirror_every = spec.mirror_every;
  if (held && shard != ShardStage::none) {
    auto distance = agree_buddy_distance(**comm, env.node, replica.timeout);
    if (!distance.ok()) return distance.status();
    replica.mirror_distance = *distance;
    replica.mirror_comm = mirror_comm.get();
  }
  if (start->mirror_step >= 0) {
    replica.mirror.hold = &held->mirror;
    replica.mirror.step = start->mirror_step;
    replica.mirror.distance = start->mirror_distance;
    replica.mirror.from_world = start->mirror_world;
    if (a.index == 0)
      replica.mirror.restored = [&s, &a, gen, step = start->mirror_step](int64_t bytes) {
        Status st = gcs::note_recovery_mode(*s.store, a.job, static_cast<int>(gen), "live", step, -1, bytes);
        if (!st.ok()) spdlog::warn("job {}: recording the live recovery's bytes: {}", a.job.short_hex(), st.to_string());
      };
  }
  ShardStats shard_stats;
  replica.shard_stats = &shard_stats;
  GradBucketStats buckets;
  replica.bucket_stats = &buckets;
  if (start->state) replica.resume = &*start->state;
  if (start->state && start->manifest && shard != ShardStage::none)
    replica.resume_ranges = [m = *start->manifest](size_t total, const std::vector<checkpoint::Range>& params,
                                                   const std::vector<checkpoint::Range>& optimizer) {
      return checkpoint::load_ranges(m, total, params, optimizer);
    };
  int64_t last_checkpoint = 0;
  replica.checkpoints = replica_checkpoints(*s.store, a.job, spec, a.index, trained, &last_checkpoint);
  ProgressReporter reporter(*s.store, a.job);
  if (replica.resume) reporter.start_at(first_step);
  ProgressFn progress;
  if (a.index == 0) progress = rank0_progress(*s.store, a.job, static_cast<int>(gen), reporter, start->source, first_step);
  StepRecorder step_recorder;  // the step timeline (issue 7): recorded by train_replica, published to the GCS
  StepTimelinePublisher timeline(*s.store, a.job, a.index, step_recorder);
  replica.steps = &step_recorder;
  int64_t steps_done = first_step;
  replica.steps_done = &steps_done;
  auto result = train_replica(spec.train, s.train(), s.test(), replica, progress);
  timeline.stop(result.ok());
  if (!result.ok()) {
    // How far this attempt got: a restart's steps lost are counted from the most any worker did.
    Status noted = gcs::note_failed_step(*s.store, a.job, steps_done);
    (void)noted;
    if (result.status().code() != Code::unavailable || !cancel.load()) {
      Status st = collectives::record_group_failure(*s.store, go.name, go.generation, result.status());
      (void)st;
    }
    return result.status();
  }
  // Every worker's own throughput, gathered to all (rank 0 puts it in the summary).
  const float mine = static_cast<float>(result->samples_per_second / world);
  std::vector<float> rates(static_cast<size_t>(world));
  collectives::CollectiveOptions co;
  co.timeout = replica.timeout;
  TROUPE_RETURN_IF_ERROR((*comm)->allgather(&mine, rates.data(), 1, DType::f32, co).with_context("gathering worker rates"));
  record_job_metric(*s.store, a.job, a.index, "samples_per_second", mine);
  record_job_metric(*s.store, a.job, a.index, "data_wait_ms", feed.data_wait_ms());
  record_job_metric(*s.store, a.job, a.index, "communication_ms", 1000 * buckets.comm_seconds);
  record_job_metric(*s.store, a.job, a.index, "communication_hidden_fraction", buckets.hidden_fraction());
  if (replica.shard != ShardStage::none)  // what this worker held at its peak (trainers/sharded/)
    record_job_metric(*s.store, a.job, a.index, "sharded_state_bytes", static_cast<double>(shard_stats.total()));
  if (a.index != 0) return {};
  TROUPE_RETURN_IF_ERROR(trained.durable_through(result->steps).with_context("recording the trained steps"));
  return record_sync_result(spec, s, a, gen, *result, replica, go, **comm, rates, *start, last_checkpoint,
                            steps_per_epoch, world, buckets, shard_stats);
}

// Worker `a` (its index: its slot) in generation `gen` of a live elastic job's group: its rank and
// the group's size from the generation's plan (gcs/group_plan.h: the job shrank or grew back),
// else its slot and the size it was started with. unavailable when the plan leaves it out (the
// job went on without it).
Expected<MemberArgs> member_at(gcs::Store& store, const MemberArgs& a, const std::string& group, int64_t gen) {
  auto plan = gcs::group_plan(store, group, gen);
  if (!plan.ok()) return plan.status().with_context("reading generation " + std::to_string(gen) + "'s plan");
  if (!plan->has_value()) return a;
  MemberArgs at = a;
  at.index = gcs::rank_in_plan(**plan, a.index);
  at.world = static_cast<int>((*plan)->size());
  if (at.index < 0)
    return Status(Code::unavailable, "worker " + std::to_string(a.index) + " is not in generation " + std::to_string(gen) +
                                         " of group '" + group + "': the job went on without it");
  if (at.index != a.index || at.world != a.world)
    spdlog::info("job {} worker {}: rank {} of {} at generation {}", a.job.short_hex(), a.index, at.index, at.world, gen);
  return at;
}

Status run_sync(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s, const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  if (spec.gpus_per_worker > 0) return run_sync_gpu(env, a, s, cancel);
  const int world = a.world > 0 ? std::min(a.world, spec.workers) : spec.workers;
  if (world != spec.workers && !spec.elastic)
    return invalid_argument("told to run with " + std::to_string(world) + " of " + std::to_string(spec.workers) +
                            " workers, but the job is not elastic");
  if (!recovers_live(spec)) return train_generation(env, a, s, cancel, a.attempt, nullptr, nullptr);
  // Live recovery (trainers/job/live_recovery.h): after a peer is lost mid-step this worker keeps its
  // state, waits for the replacements' generation and goes on there.
  HeldState held;
  const std::string group = "job-" + a.job.hex();
  for (int64_t gen = a.attempt;;) {
    auto at = spec.elastic ? member_at(*s.store, a, group, gen) : Expected<MemberArgs>(a);
    if (!at.ok()) return at.status();
    int64_t newer = -1;
    Status st = train_generation(env, *at, s, cancel, gen, &held, &newer);
    if (st.ok()) return st;
    if (newer > gen) {  // the replacements went to a newer generation while this one formed
      gen = newer;
      continue;
    }
    if (!held.held || cancel.load()) return st;
    spdlog::warn("job {} worker {}: {}; keeping the state of step {} for the replacement", a.job.short_hex(), a.index,
                 st.to_string(), held.state.step);
    auto next = await_replacements(*s.store, group, gen, std::chrono::milliseconds(spec.collective_timeout_ms), cancel);
    if (!next.ok()) return next.status().with_context("after: " + st.message());
    gen = *next;
  }
}

}  // namespace

collectives::GroupOptions sync_group_options(const actors::NodeEnvironment& env, const MemberArgs& a,
                                             const std::string& transport, int world, int64_t generation) {
  collectives::GroupOptions go;
  go.name = "job-" + a.job.hex();
  go.rank = a.index;
  go.world_size = world;
  go.host = env.bind;
  go.node = env.node;
  go.actor = a.actor;
  go.transport = transport;
  go.generation = generation;
  return go;
}

Expected<MemberArgs> parse_member_args(const std::vector<std::string>& args) {
  if (args.size() != 4 && args.size() != 5) {
    return invalid_argument("a job actor takes 4 arguments (job id, index, attempt, actor id), or 5 with the "
                            "world size of an elastic job after the index, got " + std::to_string(args.size()));
  }
  const size_t at = args.size() - 2;  // the attempt's position
  MemberArgs m;
  auto job = JobId::from_hex(args[0]);
  if (!job.ok()) return job.status().with_context("job id");
  m.job = *job;
  auto number = [](const std::string& text, const char* what, int* out) -> Status {
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < 0 || v > 1 << 20) {
      return invalid_argument(std::string("job actor ") + what + " '" + text + "' is not a number >= 0");
    }
    *out = static_cast<int>(v);
    return {};
  };
  TROUPE_RETURN_IF_ERROR(number(args[1], "index", &m.index));
  TROUPE_RETURN_IF_ERROR(number(args[at], "attempt", &m.attempt));
  if (args.size() == 5) {
    TROUPE_RETURN_IF_ERROR(number(args[2], "world size", &m.world));
    if (m.world < 1 || m.index >= m.world) {
      return invalid_argument("job actor index " + args[1] + " is outside its world of " + args[2] + " workers");
    }
  }
  auto actor = ActorId::from_hex(args[at + 1]);
  if (!actor.ok()) return actor.status().with_context("actor id");
  m.actor = *actor;
  return m;
}

Status run_worker(const actors::NodeEnvironment& env, const MemberArgs& a, const std::atomic<bool>& cancel) {
  const std::string who = "job " + a.job.short_hex() + " worker " + std::to_string(a.index);
  auto setup = prepare(env, a.job);
  if (!setup.ok()) return setup.status().with_context(who);
  spdlog::info("{}: {} training {} on node {}", who, setup->spec.strategy, setup->spec.train.model, env.node.short_hex());
  Status st;
  if (setup->spec.strategy == "sync") {
    st = run_sync(env, a, *setup, cancel);
  } else if (setup->spec.strategy == "pipeline") {
    st = run_pipeline_worker(env, a, *setup, cancel);
  } else {
    st = run_ps_worker(env, a, *setup, cancel);
  }
  return st.with_context(who);
}

}  // namespace troupe::job
