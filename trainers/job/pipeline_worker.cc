#include "trainers/job/pipeline_worker.h"

#include <optional>

#include <spdlog/spdlog.h>

#include "collectives/group_rendezvous.h"
#include "gcs/job_recovery.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_report.h"
#include "trainers/job/pipeline_live.h"
#include "trainers/job/pipeline_model.h"
#include "trainers/job/sync_recovery.h"
#include "trainers/setup/model_file.h"
#include "trainers/pipeline/schedule.h"
#include "trainers/pipeline/stage_checkpoint.h"
#include "trainers/pipeline/stage_trainer.h"

namespace troupe::job {
namespace {

// What each stage tells the reporter at the end, as doubles (gathered as opaque f32 words).
constexpr int kReportFields = 10;
void pack(const pipeline::StageReport& r, double samples_per_second, double* out) {
  const double v[kReportFields] = {double(r.first_layer), double(r.end_layer), double(r.param_bytes),
                                   double(r.grad_bytes),  double(r.optimizer_bytes), double(r.activation_bytes),
                                   double(r.model_bytes), r.memory_fraction(),       r.bubble_fraction,
                                   samples_per_second};
  std::copy(v, v + kReportFields, out);
}

nlohmann::json stages_json(const std::vector<double>& all, int stages) {
  nlohmann::json out = nlohmann::json::array();
  for (int s = 0; s < stages; ++s) {
    const double* v = all.data() + static_cast<size_t>(s) * kReportFields;
    out.push_back({{"stage", s}, {"layers", {int(v[0]), int(v[1])}}, {"param_bytes", int64_t(v[2])},
                   {"grad_bytes", int64_t(v[3])}, {"optimizer_bytes", int64_t(v[4])},
                   {"activation_bytes", int64_t(v[5])}, {"model_bytes", int64_t(v[6])}, {"memory_fraction", v[7]},
                   {"bubble_fraction", v[8]}});
  }
  return out;
}

Expected<std::unique_ptr<collectives::Communicator>> join(gcs::Store& store, const actors::NodeEnvironment& env,
                                                          const MemberArgs& a, const JobSpec& spec,
                                                          const std::string& name, int rank, int size) {
  collectives::GroupOptions go;
  go.name = name;
  go.generation = a.attempt;  // a restarted gang forms its groups anew
  go.rank = rank;
  go.world_size = size;
  go.host = env.bind;
  go.node = env.node;
  go.actor = a.actor;
  go.transport = spec.transport;
  auto tls = data_plane_tls(spec);
  if (!tls.ok()) return tls.status();
  go.tls = *tls;
  auto comm = collectives::form_group(store, go);
  if (!comm.ok()) return comm.status().with_context("forming group " + name);
  return comm;
}

// Worker 0 chooses where the job starts; the choice goes to stage 0 of every replica over the
// stage-0 group, then down each replica's pipe (each stage then loads its own part: StageCheckpoints).
Expected<StartChoice> agree_start(gcs::Store& store, const JobSpec& spec, const MemberArgs& a, int stage,
                                  collectives::Communicator* pipe, collectives::Communicator* peers,
                                  std::chrono::milliseconds timeout) {
  StartChoice c;
  if (a.index == 0) {
    auto chosen = choose_start(store, spec, a.job);
    if (!chosen.ok()) return chosen.status();
    c = *chosen;
  }
  if (stage == 0 && peers) TROUPE_RETURN_IF_ERROR(broadcast_start_choice(*peers, &c, timeout));
  if (pipe) TROUPE_RETURN_IF_ERROR(broadcast_start_choice(*pipe, &c, timeout));
  return c;
}

// Every worker forms its pipe group first, then its stage group: no worker waits on a group whose
// members are still waiting on another. A group of one is not formed (left null).
Status join_groups(gcs::Store& store, const actors::NodeEnvironment& env, const MemberArgs& a, const JobSpec& spec,
                   const pipeline::PipelineOptions& po, std::unique_ptr<collectives::Communicator>* pipe,
                   std::unique_ptr<collectives::Communicator>* peers) {
  const int stages = po.stages, replicas = po.replicas();
  const int stage = a.index % stages, replica = a.index / stages;
  const std::string prefix = "job-" + a.job.hex();
  if (stages > 1) {
    auto c = join(store, env, a, spec, prefix + "-pipe-" + std::to_string(replica), stage, stages);
    if (!c.ok()) return c.status();
    *pipe = std::move(*c);
  }
  if (replicas > 1) {
    auto c = join(store, env, a, spec, prefix + "-stage-" + std::to_string(stage), replica, replicas);
    if (!c.ok()) return c.status();
    *peers = std::move(*c);
  }
  return {};
}

// Every stage's report (its `r` and `rate`) to every stage of the replica, kReportFields each (the
// reporter writes them into the summary).
Expected<std::vector<double>> gather_reports(const pipeline::StageReport& r, double rate, int stages,
                                             collectives::Communicator* pipe, std::chrono::milliseconds timeout) {
  std::vector<double> mine(kReportFields), all(static_cast<size_t>(kReportFields) * stages);
  pack(r, rate, mine.data());
  if (pipe) {
    collectives::CollectiveOptions co;
    co.timeout = timeout;
    TROUPE_RETURN_IF_ERROR(pipe->allgather(mine.data(), all.data(), 2 * kReportFields, DType::f32, co)
                               .with_context("gathering the stages' reports"));
  } else {
    all = mine;
  }
  return all;
}

// Where a run started and its last checkpoint, as the summary tells them.
struct RunPoints {
  StartChoice choice;           // where the job started (kind 1: this job's checkpoint)
  int64_t first_step = 0;       // 0: a fresh start
  int64_t steps_per_epoch = 0;
  int64_t last_checkpoint = 0;  // the step of the last checkpoint committed
};

// The job's summary, written by the reporter: its result, every stage's report (`all`) and the
// mean bubble over the stages.
nlohmann::json pipeline_summary(const JobSpec& spec, const MemberArgs& a, const pipeline::PipelineOptions& po,
                                const TrainResult& train, const std::vector<double>& all, double bubble,
                                const RunPoints& run) {
  const int stages = po.stages;
  nlohmann::json summary = train_result_json(train);
  summary["strategy"] = spec.strategy;
  summary["workers"] = spec.workers;
  summary["job_id"] = a.job.hex();
  summary["stages"] = stages;
  summary["replicas"] = po.replicas();
  summary["microbatches"] = po.microbatches;
  summary["schedule"] = po.schedule;
  summary["stage_reports"] = stages_json(all, stages);
  summary["bubble_fraction"] = bubble;
  summary["bubble_estimate_gpipe"] = pipeline::gpipe_bubble_estimate(stages, po.microbatches);
  summary["steps_per_epoch"] = run.steps_per_epoch;
  summary["attempt"] = a.attempt;
  // Every step was recorded by this job (not resumed from another's checkpoint): the supervisor
  // proves the data accounting from the GCS (gcs/data_accounting.h).
  summary["trained_ranges"] = spec.resume_job.empty();
  if (run.first_step > 0)
    summary["resumed_from"] = {{"job_id", run.choice.kind == 1 ? a.job.hex() : spec.resume_job},
                               {"step", run.first_step}};
  if (spec.checkpoint_every > 0) {
    summary["checkpoint_every"] = spec.checkpoint_every;
    summary["last_checkpoint_step"] = run.last_checkpoint;
    summary["checkpoint_dir"] = checkpoint_dir(spec, a.job);
  }
  return summary;
}

// A generation's groups: the job's group of every worker (live recovery only: the agreement on
// where to go on, and where replacements show), the replica's pipe and the stage's group (a group
// of one is not formed), each interrupted by a stop and, live, by a newer generation of the job's.
struct StageGroups {
  std::unique_ptr<collectives::Communicator> job, pipe, peers;
  Interrupts::Registration job_stop, pipe_stop, peers_stop;
  std::optional<GenerationWatch> watch;
};

Status form_stage_groups(gcs::Store& store, const actors::NodeEnvironment& env, const MemberArgs& g,
                         const JobSpec& spec, const pipeline::PipelineOptions& po, bool live, int64_t* superseded,
                         StageGroups* out) {
  if (live) {
    // TCP whatever the job's transport: the group is idle while the stages train (an idle shared-memory
    // group cost a 2x2 pipeline's steps 40% on 2 cores: bench/pipeline_live_cost.sh), and carries
    // only the agreement and, with one replica, a lost stage's state.
    collectives::GroupOptions go = sync_group_options(env, g, "tcp", spec.workers, g.attempt);
    go.superseded_by = superseded;
    // A replacement may wait for survivors still blocked in the broken step (a cut link is noticed
    // only at its deadline), so registration outlasts the collective timeout.
    go.timeout = std::max(go.timeout, std::chrono::milliseconds(spec.collective_timeout_ms + 30000));
    auto tls = data_plane_tls(spec);
    if (!tls.ok()) return tls.status();
    go.tls = *tls;
    auto formed = collectives::form_group(store, go);
    if (!formed.ok()) return formed.status().with_context("forming the job's group");
    out->job = std::move(*formed);
  }
  TROUPE_RETURN_IF_ERROR(join_groups(store, env, g, spec, po, &out->pipe, &out->peers));
  if (g.interrupts) {
    out->job_stop = g.interrupts->add(out->job ? &out->job->transport() : nullptr);
    out->pipe_stop = g.interrupts->add(out->pipe ? &out->pipe->transport() : nullptr);
    out->peers_stop = g.interrupts->add(out->peers ? &out->peers->transport() : nullptr);
  }
  if (live)
    out->watch.emplace(store, "job-" + g.job.hex(), g.attempt,
                       std::vector<collectives::Transport*>{&out->job->transport(),
                                                            out->pipe ? &out->pipe->transport() : nullptr,
                                                            out->peers ? &out->peers->transport() : nullptr});
  return {};
}

// Where a generation starts: live, this stage's state from memory (pipeline_live.h); else the
// job's newest checkpoint after a restart, or the beginning (agree_start).
struct GenerationStart {
  StartChoice choice;
  std::optional<LiveStart> live;
  int64_t first_step() const { return live ? live->state.step : choice.kind ? choice.step : 0; }
};

Expected<GenerationStart> start_generation(gcs::Store& store, const JobSpec& spec, const MemberArgs& g, int stage,
                                           const StageGroups& groups, pipeline::StageHold* hold,
                                           std::chrono::milliseconds timeout) {
  GenerationStart start;
  if (hold) {
    auto live = agree_stage_state(*groups.job, groups.peers.get(), stage, pipeline_options(spec).stages, *hold,
                                  timeout);
    if (!live.ok()) return live.status();
    if (live->live) {
      start.choice = StartChoice{1, live->state.step};  // the job's own state (the summary's resumed_from)
      start.live = std::move(*live);
      return start;
    }
  }
  auto choice = agree_start(store, spec, g, stage, groups.pipe.get(), groups.peers.get(), timeout);
  if (!choice.ok()) return choice.status();
  start.choice = *choice;
  return start;
}

// One generation of a pipeline worker: its groups formed at `g.attempt`, its start agreed, its
// stage trained. Live jobs pass `hold` (what the stage keeps when a peer is lost) and `superseded`
// (set to a newer generation when the replacements went there while this one formed).
Status train_generation(const actors::NodeEnvironment& env, const MemberArgs& g, JobSetup& s,
                        const std::atomic<bool>& cancel, pipeline::StageHold* hold, int64_t* superseded) {
  const JobSpec& spec = s.spec;
  const pipeline::PipelineOptions po = pipeline_options(spec);
  const int stages = po.stages, replicas = po.replicas();
  const int stage = g.index % stages, replica = g.index / stages;
  const int64_t gen = g.attempt;
  StageGroups groups;
  TROUPE_RETURN_IF_ERROR(form_stage_groups(*s.store, env, g, spec, po, hold != nullptr, superseded, &groups));
  collectives::Communicator* const pipe = groups.pipe.get();
  pipeline::StageComms comms;
  comms.pipe = pipe ? &pipe->transport() : nullptr;
  comms.replicas = groups.peers.get();
  comms.timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  comms.cancel = &cancel;
  comms.hold = hold;
  if (hold && replicas == 1 && pipe) {  // no other replica: each stage mirrors its state to a buddy stage
    auto distance = agree_buddy_distance(*pipe, env.node, comms.timeout);
    if (!distance.ok()) return distance.status();
    comms.mirror_distance = *distance;
    comms.mirror_every = static_cast<int>(spec.mirror_every);  // a lost stage: back to its buddy's newest round
  }
  int64_t steps_done = 0;
  comms.steps_done = &steps_done;
  const bool reporter = replica == 0 && stage == stages - 1;
  const int64_t steps_per_epoch = s.train().count / spec.train.batch_size;
  const bool saves = replica == 0 && !spec.train.save_path.empty();  // --save: replica 0's stages
  if (reporter && saves) TROUPE_RETURN_IF_ERROR(check_save_target(spec.train.save_path));

  // Where to start: live, the stage's state from memory; else the job's newest intact checkpoint
  // after a restart, each stage its own part.
  auto start = start_generation(*s.store, spec, g, stage, groups, hold, comms.timeout);
  if (!start.ok()) return start.status();
  const int64_t first_step = start->first_step();
  std::string source = start->live ? live_source(*start->live) : "";
  if (reporter && start->live)  // the trained ranges put at the live step, the recovery recorded
    TROUPE_RETURN_IF_ERROR(rewind_live(*s.store, g.job, 0, steps_per_epoch, gen, *start->live));
  pipeline::StageCheckpoints ckpt;
  ckpt.resume = [&](size_t total, size_t begin, size_t end) -> Expected<std::optional<checkpoint::TrainingState>> {
    if (start->live) return std::optional<checkpoint::TrainingState>(std::move(start->live->state));
    auto loaded = load_start_range(*s.store, spec, g.job, start->choice, total, begin, end, stage);
    if (!loaded.ok()) return loaded.status();
    source = loaded->source;
    // The reporter keeps the job's trained ranges: after a restart it first drops the failed
    // attempt's ranges past the checkpoint (a pipeline has no shard ledger: its batches come by step).
    if (reporter && gen > 0) TROUPE_RETURN_IF_ERROR(rewind_to(*s.store, g.job, 0, steps_per_epoch, *loaded));
    return std::move(loaded->state);
  };
  // Checkpoints: replica 0's stages write their layers' shards (the replicas of a stage hold the
  // same parameters), the reporter commits the manifest once all K are durable.
  TrainedLog trained(*s.store, g.job, static_cast<int>(gen), steps_per_epoch, first_step);
  int64_t last_checkpoint = 0;
  if (spec.checkpoint_every > 0) {
    ckpt.every = spec.checkpoint_every;
    const checkpoint::CommitFn commit = [&](const checkpoint::Manifest& m) -> Status {
      TROUPE_RETURN_IF_ERROR(commit_trained_checkpoint(*s.store, g.job, spec, trained, m));
      last_checkpoint = m.step;
      return {};
    };
    ckpt.write = [&, commit](const pipeline::StageSnapshot& snap) -> Status {
      if (replica != 0) return {};
      return pipeline::write_stage_checkpoint(snap, g.job.hex(), checkpoint_dir(spec, g.job), pipe, comms.timeout,
                                              commit);
    };
  }
  ProgressReporter progress_reporter(*s.store, g.job);
  if (first_step > 0) progress_reporter.start_at(first_step);
  ProgressFn progress;
  bool resumed_noted = gen == 0;
  if (reporter) {
    progress = [&](const TrainProgress& p) {
      progress_reporter.on_progress(p);
      if (resumed_noted) return;
      resumed_noted = true;  // the first step of a restarted attempt: recovery is over
      note_resumed(*s.store, g.job, static_cast<int>(gen), source, first_step);
    };
  }
  auto result = pipeline::train_stage(spec.train, po, s.train(), s.test(), comms, progress, ckpt);
  if (!result.ok()) {
    // How far this stage got: a restart's steps lost are counted from the most any worker did.
    Status noted = gcs::note_failed_step(*s.store, g.job, std::max(steps_done, first_step));
    (void)noted;
    return result.status().with_context("stage " + std::to_string(stage) + " of replica " + std::to_string(replica));
  }
  if (saves) TROUPE_RETURN_IF_ERROR(save_pipeline_model(s, *result, pipe, reporter, comms.timeout));
  const pipeline::StageReport& r = result->report;
  const double rate = result->train.samples_per_second / replicas;
  record_job_metric(*s.store, g.job, g.index, "samples_per_second", rate);
  record_job_metric(*s.store, g.job, g.index, "bubble_fraction", r.bubble_fraction);
  record_job_metric(*s.store, g.job, g.index, "memory_bytes", double(r.param_bytes + r.grad_bytes + r.optimizer_bytes));
  record_job_metric(*s.store, g.job, g.index, "memory_fraction", r.memory_fraction());
  auto all = gather_reports(r, rate, stages, pipe, comms.timeout);
  if (!all.ok()) return all.status();
  if (!reporter) return {};
  TROUPE_RETURN_IF_ERROR(trained.durable_through(result->train.steps).with_context("recording the trained steps"));
  double bubble = 0;
  for (int i = 0; i < stages; ++i) bubble += (*all)[static_cast<size_t>(i) * kReportFields + 8] / stages;
  nlohmann::json summary = pipeline_summary(spec, g, po, result->train, *all, bubble,
                                            RunPoints{start->choice, first_step, steps_per_epoch, last_checkpoint});
  add_recovery(&summary, *s.store, g.job, recovers_live(spec) ? "live" : "checkpoint");
  record_job_metric(*s.store, g.job, -1, "bubble_fraction", bubble);
  return record_success(*s.store, g.job, summary, result->train.test_accuracy);
}

}  // namespace

Status run_pipeline_worker(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s,
                           const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  if (!recovers_live(spec)) return train_generation(env, a, s, cancel, nullptr, nullptr);
  // Live recovery (trainers/job/pipeline_live.h): after a peer is lost this stage keeps its state,
  // waits for the replacements' generation and goes on there.
  pipeline::StageHold hold;
  const std::string group = "job-" + a.job.hex();
  MemberArgs g = a;
  for (;;) {
    int64_t newer = -1;
    Status st = train_generation(env, g, s, cancel, &hold, &newer);
    if (st.ok()) return st;
    if (newer > g.attempt) {  // the replacements went to a newer generation while this one formed
      g.attempt = static_cast<int>(newer);
      continue;
    }
    if (!hold.held || cancel.load()) return st;
    spdlog::warn("job {} worker {}: {}; keeping stage {}'s state of step {} for the replacement", a.job.short_hex(),
                 a.index, st.to_string(), a.index % spec.stages, hold.newest_step());
    auto next = await_replacements(*s.store, group, g.attempt, std::chrono::milliseconds(spec.collective_timeout_ms),
                                   cancel);
    if (!next.ok()) return next.status().with_context("after: " + st.message());
    g.attempt = static_cast<int>(*next);
  }
}

}  // namespace troupe::job
