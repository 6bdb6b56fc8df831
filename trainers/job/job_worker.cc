#include "trainers/job/job_worker.h"

#include <spdlog/spdlog.h>

#include "collectives/group_rendezvous.h"
#include "trainers/grad_buckets.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_report.h"
#include "trainers/job/job_setup.h"
#include "trainers/job/job_spec.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/job/pipeline_worker.h"
#include "trainers/job/ps_member.h"
#include "trainers/trainer_driver.h"

namespace troupe::job {
namespace {

Status run_sync(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s, const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  const int world = spec.workers;
  checkpoint::TrainingState resume_state;
  if (!spec.resume_job.empty()) {
    auto state = load_resume_state(*s.store, spec);
    if (!state.ok()) return state.status();
    resume_state = std::move(*state);
  }
  collectives::GroupOptions go;
  go.name = "job-" + a.job.hex();
  go.rank = a.index;
  go.world_size = world;
  go.host = env.bind;
  go.node = env.node;
  go.actor = a.actor;
  go.transport = spec.transport;
  auto comm = collectives::form_group(*s.store, go);
  if (!comm.ok()) return comm.status().with_context("forming the job's collective group");

  LedgerFeedOptions fo;
  fo.plan.shards = world;
  fo.plan.policy = data::ShardPolicy::interleaved;
  fo.plan.seed = spec.train.seed;
  fo.plan.block = spec.train.batch_size / world;
  fo.batch_size = spec.train.batch_size / world;
  fo.one_shard_per_epoch = true;
  LedgerFeed feed(s.train, *s.store, a.job, WorkerId::random(), fo);

  Replica replica;
  replica.comm = comm->get();
  replica.feed = &feed;
  replica.checksum_every = spec.checksum_every;
  replica.timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  replica.cancel = &cancel;
  replica.bucket_bytes = static_cast<size_t>(effective_bucket_bytes(spec));
  GradBucketStats buckets;
  replica.bucket_stats = &buckets;
  if (!spec.resume_job.empty()) replica.resume = &resume_state;
  int64_t last_checkpoint = 0;
  if (spec.checkpoint_every > 0) {
    replica.checkpoint_every = spec.checkpoint_every;
    replica.checkpoint_dir = checkpoint_dir(spec, a.job);
    replica.checkpoint_tag = a.job.hex();
    if (a.index == 0) {
      // The manifest, written after every replica's shard is durable (train_replica's barrier).
      replica.checkpoint_commit = [&](const checkpoint::Manifest& m) -> Status {
        TROUPE_RETURN_IF_ERROR(commit_checkpoint(*s.store, a.job, spec, m));
        last_checkpoint = m.step;
        return {};
      };
    }
  }
  ProgressReporter reporter(*s.store, a.job);
  if (replica.resume) reporter.start_at(resume_state.step);
  ProgressFn progress;
  if (a.index == 0) progress = [&reporter](const TrainProgress& p) { reporter.on_progress(p); };
  auto result = train_replica(spec.train, s.train, s.test, replica, progress);
  if (!result.ok()) {
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
  if (a.index != 0) return {};
  nlohmann::json summary = train_result_json(*result);
  summary["strategy"] = spec.strategy;
  summary["workers"] = world;
  summary["job_id"] = a.job.hex();
  summary["worker_samples_per_second"] = rates;
  summary["bucket_bytes"] = effective_bucket_bytes(spec);
  summary["communication_seconds"] = buckets.comm_seconds;
  summary["communication_hidden_fraction"] = buckets.hidden_fraction();
  if (!spec.resume_job.empty()) {
    summary["resumed_from"] = {{"job_id", spec.resume_job}, {"step", spec.resume_step},
                               {"epoch", resume_state.epoch}, {"epoch_step", resume_state.epoch_step}};
  }
  if (spec.checkpoint_every > 0) {
    summary["checkpoint_every"] = spec.checkpoint_every;
    summary["last_checkpoint_step"] = last_checkpoint;
    summary["checkpoint_dir"] = replica.checkpoint_dir;
  }
  return record_success(*s.store, a.job, summary, result->test_accuracy);
}

}  // namespace

Expected<MemberArgs> parse_member_args(const std::vector<std::string>& args) {
  if (args.size() != 3) {
    return invalid_argument("a job actor takes 3 arguments (job id, index, actor id), got " +
                            std::to_string(args.size()));
  }
  MemberArgs m;
  auto job = JobId::from_hex(args[0]);
  if (!job.ok()) return job.status().with_context("job id");
  m.job = *job;
  char* end = nullptr;
  const long index = std::strtol(args[1].c_str(), &end, 10);
  if (args[1].empty() || *end != '\0' || index < 0 || index > 1 << 20) {
    return invalid_argument("job actor index '" + args[1] + "' is not a number >= 0");
  }
  m.index = static_cast<int>(index);
  auto actor = ActorId::from_hex(args[2]);
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
