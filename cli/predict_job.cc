#include "cli/predict_job.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "actors/head_messages.h"
#include "cli/cluster_commands.h"
#include "cli/job_follow.h"
#include "data/dataset_spec.h"
#include "gcs/events.h"
#include "gcs/tables.h"
#include "trainers/job/predict_worker.h"

namespace troupe::cli {
namespace {

namespace fs = std::filesystem;

// The files a job cannot do without, checked before anything is recorded. Paths are the ones the
// predictors will read (they run on this host in a local cluster; elsewhere the same paths must
// exist on every node).
Status check_paths(const job::PredictJobSpec& s) {
  const std::string& model = s.predict.model;
  if (!fs::exists(model))
    return not_found("--model " + model + " does not exist: give the .safetensors file troupe saved (--save, troupe export)");
  if (!std::ifstream(model, std::ios::binary))
    return invalid_argument("--model " + model + " cannot be read: check its permissions");
  const fs::path out(s.predict.out);
  const fs::path dir = out.parent_path();
  if (!fs::is_directory(dir))
    return invalid_argument("--out " + s.predict.out + ": the directory " + dir.string() + " does not exist: create it first");
  // Tried, not asked (access() says yes to root on file systems that refuse it).
  const std::string probe = (dir / (".troupe-write-probe-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return invalid_argument("--out " + s.predict.out + ": the directory " + dir.string() + " is not writable (" +
                            std::strerror(errno) + "): choose a directory you can write (the predictors write "
                            "their parts and the output there)");
  ::close(fd);
  ::unlink(probe.c_str());
  if (fs::is_directory(out)) return invalid_argument("--out " + s.predict.out + " is a directory: name the .npy file to write");
  return {};
}

Status check_capacity(gcs::Store& store, const job::PredictJobSpec& spec) {
  auto nodes = gcs::Table<gcs::NodeRecord>(store).list();
  if (!nodes.ok()) return nodes.status();
  double cpus = 0;
  int alive = 0;
  for (const gcs::NodeRecord& n : *nodes) {
    if (n.state != gcs::NodeState::alive) continue;
    ++alive;
    cpus += n.total.cpus;
  }
  if (spec.cpus_per_worker * spec.workers > cpus + 1e-9) {
    return invalid_argument(std::to_string(spec.workers) + " predictors need " +
                            std::to_string(spec.cpus_per_worker * spec.workers) + " cpus; the cluster has " +
                            std::to_string(cpus) + " on " + std::to_string(alive) +
                            " alive node(s): use fewer --workers, a smaller --cpus-per-worker, or add nodes");
  }
  return {};
}

actors::SubmitJob submit_message(const JobId& id, const job::PredictJobSpec& spec) {
  actors::SubmitJob s;
  s.job_id = id.hex();
  s.max_restarts = spec.max_restarts;
  s.restart_backoff_ms = spec.restart_backoff_ms;
  s.restart_whole_gang = false;  // a failed predictor is replaced; the others go on
  s.progress_timeout_ms = 0;
  s.restart_on = spec.restart_on;
  const std::string prefix = "job-" + id.short_hex() + "-";
  for (int r = 0; r < spec.workers; ++r) {
    s.actors.push_back({job::kPredictorActorType, prefix + "predictor-" + std::to_string(r), spec.cpus_per_worker, 0,
                        {id.hex(), std::to_string(r)}});
  }
  return s;
}

}  // namespace

int run_predict_job(PredictJobFlags f, GlobalOptions& global) {
  job::PredictJobSpec& spec = f.spec;
  PredictOptions& p = spec.predict;
  for (std::string* path : {&p.model, &p.out}) *path = fs::absolute(*path).lexically_normal().string();
  p.data = data::absolute_spec(p.data);  // a spec: "text:FILE", or several paths with commas
  TROUPE_RETURN_IF_ERROR_CLI(check_paths(spec), "predict");
  auto info = Session::current().read_cluster();
  if (!info.ok())
    return report_error("predict", info.status().with_context("--workers runs the prediction on a cluster (troupe up); "
                                                              "without --workers it runs in this process"));
  auto store = connect_gcs(*info);
  if (!store.ok()) return report_error("predict", store.status());
  TROUPE_RETURN_IF_ERROR_CLI(check_capacity(**store, spec), "predict");

  gcs::JobRecord job;
  job.id = JobId::random();
  const fs::path out(p.out);
  spec.parts_dir = (out.parent_path() / ("." + out.filename().string() + ".parts-" + job.id.short_hex())).string();
  TROUPE_RETURN_IF_ERROR_CLI(job::validate(spec), "predict");
  job.name = spec.name;
  job.strategy = job::kPredictStrategy;
  job.workers = spec.workers;
  job.epochs = 1;
  job.spec = job::to_settings(spec);
  job.submitted_ms = gcs::now_ms();
  job.updated_ms = job.submitted_ms;
  job.message = "submitted";
  TROUPE_RETURN_IF_ERROR_CLI(gcs::Table<gcs::JobRecord>(**store).put(job), "predict");

  auto hp = actors::parse_host_port(info->head_address);
  if (!hp.ok()) return report_error("predict", hp.status());
  auto sys = actors::ActorSystem::start(actors::ActorSystemOptions{});
  if (!sys.ok()) return report_error("predict", sys.status());
  auto head = (*sys)->connect(hp->first, hp->second);
  if (!head.ok()) return report_error("predict", head.status().with_context("reaching the head"));
  auto reply = actors::request_blocking<actors::SubmitJobReply>((*sys)->system(), *head, std::chrono::seconds(60),
                                                                submit_message(job.id, spec),
                                                                "submitting prediction job " + job.id.short_hex());
  if (!reply.ok()) return report_error("predict", reply.status());
  if (f.detach) {
    if (f.json) {
      std::printf("%s\n", nlohmann::json{{"job_id", job.id.hex()}, {"started", reply->started},
                                         {"pending_reason", reply->pending_reason}}.dump().c_str());
    } else {
      std::printf("%s\n", job.id.hex().c_str());
    }
    return 0;
  }
  std::fprintf(stderr, "job %s submitted (predict, %d workers); `troupe stop %s` stops it\n", job.id.short_hex().c_str(),
               spec.workers, job.id.short_hex().c_str());
  FollowOptions fo;
  fo.progress = global.config.progress && !f.no_progress && !f.json;
  fo.progress_interval_ms = global.config.progress_interval_ms;
  fo.pending_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.pending_timeout * 1000));
  fo.stall_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.stall_timeout * 1000));
  fo.json = f.json;
  fo.command = "predict";
  fo.outage_grace = std::chrono::milliseconds(global.config.outage_grace_ms);
  return follow_job(**store, job.id, fo);
}

}  // namespace troupe::cli
