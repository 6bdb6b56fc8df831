#include "trainers/job/pipeline_worker.h"

#include <spdlog/spdlog.h>

#include "collectives/group_rendezvous.h"
#include "trainers/job/job_report.h"
#include "trainers/pipeline/schedule.h"
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
  go.generation = a.attempt;  // a restarted gang forms its groups anew (it starts over: no checkpoints yet)
  go.rank = rank;
  go.world_size = size;
  go.host = env.bind;
  go.node = env.node;
  go.actor = a.actor;
  go.transport = spec.transport;
  auto comm = collectives::form_group(store, go);
  if (!comm.ok()) return comm.status().with_context("forming group " + name);
  return comm;
}

}  // namespace

Status run_pipeline_worker(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s,
                           const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  const pipeline::PipelineOptions po = pipeline_options(spec);
  const int stages = po.stages, replicas = po.replicas();
  const int stage = a.index % stages, replica = a.index / stages;
  const std::string prefix = "job-" + a.job.hex();
  // Every worker forms its pipe group first, then its stage group: no worker waits on a group
  // whose members are still waiting on another.
  std::unique_ptr<collectives::Communicator> pipe, peers;
  if (stages > 1) {
    auto c = join(*s.store, env, a, spec, prefix + "-pipe-" + std::to_string(replica), stage, stages);
    if (!c.ok()) return c.status();
    pipe = std::move(*c);
  }
  if (replicas > 1) {
    auto c = join(*s.store, env, a, spec, prefix + "-stage-" + std::to_string(stage), replica, replicas);
    if (!c.ok()) return c.status();
    peers = std::move(*c);
  }
  pipeline::StageComms comms;
  comms.pipe = pipe ? &pipe->transport() : nullptr;
  comms.replicas = peers.get();
  comms.timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  comms.cancel = &cancel;
  const bool reporter = replica == 0 && stage == stages - 1;
  ProgressReporter progress_reporter(*s.store, a.job);
  ProgressFn progress;
  if (reporter) progress = [&progress_reporter](const TrainProgress& p) { progress_reporter.on_progress(p); };
  auto result = pipeline::train_stage(spec.train, po, s.train, s.test, comms, progress);
  if (!result.ok()) return result.status().with_context("stage " + std::to_string(stage) + " of replica " +
                                                        std::to_string(replica));
  const pipeline::StageReport& r = result->report;
  const double rate = result->train.samples_per_second / replicas;
  record_job_metric(*s.store, a.job, a.index, "samples_per_second", rate);
  record_job_metric(*s.store, a.job, a.index, "bubble_fraction", r.bubble_fraction);
  record_job_metric(*s.store, a.job, a.index, "memory_bytes", double(r.param_bytes + r.grad_bytes + r.optimizer_bytes));
  record_job_metric(*s.store, a.job, a.index, "memory_fraction", r.memory_fraction());
  // Every stage's report to every stage of the replica (the reporter writes them into the summary).
  std::vector<double> mine(kReportFields), all(static_cast<size_t>(kReportFields) * stages);
  pack(r, rate, mine.data());
  if (pipe) {
    collectives::CollectiveOptions co;
    co.timeout = comms.timeout;
    TROUPE_RETURN_IF_ERROR(pipe->allgather(mine.data(), all.data(), 2 * kReportFields, DType::f32, co)
                               .with_context("gathering the stages' reports"));
  } else {
    all = mine;
  }
  if (!reporter) return {};
  double bubble = 0;
  for (int i = 0; i < stages; ++i) bubble += all[static_cast<size_t>(i) * kReportFields + 8] / stages;
  nlohmann::json summary = train_result_json(result->train);
  summary["strategy"] = spec.strategy;
  summary["workers"] = spec.workers;
  summary["job_id"] = a.job.hex();
  summary["stages"] = stages;
  summary["replicas"] = replicas;
  summary["microbatches"] = po.microbatches;
  summary["schedule"] = po.schedule;
  summary["stage_reports"] = stages_json(all, stages);
  summary["bubble_fraction"] = bubble;
  summary["bubble_estimate_gpipe"] = pipeline::gpipe_bubble_estimate(stages, po.microbatches);
  record_job_metric(*s.store, a.job, -1, "bubble_fraction", bubble);
  return record_success(*s.store, a.job, summary, result->train.test_accuracy);
}

}  // namespace troupe::job
