// `troupe submit`: ships a training job to the running cluster — its spec (and the user's trainer
// library) into the GCS, its actors to the head, which places them as one gang — then follows it
// with a progress bar until it ends and prints the summary (`--json`: the JSON of `troupe train
// --json`, plus strategy, workers and per-worker samples/s). `--detach` prints the job id instead.
// `--checkpoint-every N --checkpoint-dir DIR` checkpoints every N steps (sync, central, pipeline;
// async: every N x workers updates per server, and a failed server is restored from it);
// `--resume JOB` submits a new job with JOB's settings that starts from JOB's newest intact
// checkpoint (damaged or incomplete newer ones are reported and skipped); its summary names it.
// `--strategy pipeline --stages K [--microbatches M] [--schedule gpipe|1f1b] [--stage-layers ...]`
// cuts the model's layers into K stages, one per worker (--workers N: N/K pipeline replicas).
#include <cstdio>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "actors/head_messages.h"
#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/job_follow.h"
#include "cli/submit_flags.h"
#include "gcs/events.h"
#include "gcs/tables.h"
#include "trainers/job/job_actors.h"
#include "trainers/job/job_spec.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "trainers/job/ps_member.h"
#include "trainers/pipeline/pipeline_options.h"
#include "trainers/library/trainer_library_store.h"

namespace troupe::cli {
namespace {

// The spec of a job resuming `old` from its newest intact checkpoint. Checkpoints skipped on the
// way are reported on stderr (and as checkpoint_corrupt events by latest_good_checkpoint).
Expected<job::JobSpec> resume_spec(gcs::Store& store, const gcs::JobRecord& old) {
  auto spec = job::from_settings(old.spec);
  if (!spec.ok()) return spec.status().with_context("the settings of job " + old.id.hex());
  std::vector<std::string> skipped;
  JobId from = old.id;
  auto latest = checkpoint::latest_good_checkpoint(store, from, &skipped);
  // A resumed job stopped before its first checkpoint: go back to the checkpoints it resumed from.
  while (!latest.ok() && latest.status().code() == Code::not_found && !spec->resume_job.empty()) {
    auto source = JobId::from_hex(spec->resume_job);
    if (!source.ok()) return source.status().with_context("the resume_job setting of job " + from.hex());
    std::fprintf(stderr, "job %s has no checkpoint of its own; trying job %s it resumed from\n",
                 from.short_hex().c_str(), source->short_hex().c_str());
    from = *source;
    auto source_record = gcs::Table<gcs::JobRecord>(store).get(from.hex());
    if (!source_record.ok()) return source_record.status().with_context("--resume: job " + from.hex());
    auto source_spec = job::from_settings(source_record->spec);
    if (!source_spec.ok()) return source_spec.status().with_context("the settings of job " + from.hex());
    spec->resume_job = source_spec->resume_job;
    latest = checkpoint::latest_good_checkpoint(store, from, &skipped);
  }
  for (const std::string& why : skipped) std::fprintf(stderr, "warning: %s\n", why.c_str());
  if (!latest.ok()) return latest.status().with_context("--resume " + old.id.short_hex());
  spec->resume_job = from.hex();
  spec->resume_step = latest->step;
  std::fprintf(stderr, "resuming job %s (%s) from its checkpoint of step %lld in %s\n", old.id.short_hex().c_str(),
               gcs::job_state_name(old.state), static_cast<long long>(latest->step), latest->dir.c_str());
  return spec;
}

}  // namespace

Runner add_submit_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("submit", "Train on the running cluster: sync, async or central, N workers");
  auto f = std::make_shared<SubmitFlags>();
  add_job_flags(cmd, *f);
  cmd->add_option("--resume", f->resume,
                  "Continue job JOB (id or prefix) from its newest intact checkpoint, as a new job with its "
                  "settings (training flags are ignored; --checkpoint-every/--checkpoint-dir override its own)");
  cmd->add_flag("--detach", f->detach, "Print the job id and return at once");
  cmd->add_option("--pending-timeout", f->pending_timeout, "Seconds to wait for a PENDING job to start")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--stall-timeout", f->stall_timeout, "Give up following when the job reports nothing for this long")
      ->check(CLI::PositiveNumber)->capture_default_str();

  return [f, &global]() -> int {
    auto flagged = flags_spec(*f);
    if (!flagged.ok()) return report_error("submit", flagged.status());
    job::JobSpec spec = *flagged;
    auto info = Session::current().read_cluster();
    if (!info.ok()) return report_error("submit", info.status());
    auto store = connect_gcs(*info);
    if (!store.ok()) return report_error("submit", store.status());
    if (!f->resume.empty()) {
      auto old_id = find_job(**store, f->resume);
      if (!old_id.ok()) return report_error("submit", old_id.status().with_context("--resume"));
      auto old = gcs::Table<gcs::JobRecord>(**store).get(old_id->hex());
      if (!old.ok()) return report_error("submit", old.status().with_context("--resume"));
      auto resumed = resume_spec(**store, *old);
      if (!resumed.ok()) return report_error("submit", resumed.status());
      if (f->spec.checkpoint_every > 0) resumed->checkpoint_every = f->spec.checkpoint_every;
      if (!f->spec.checkpoint_dir.empty()) resumed->checkpoint_dir = f->spec.checkpoint_dir;
      spec = *resumed;
    } else if (!f->train.lib.empty()) {
      auto lib = put_trainer_library(**store, f->train.lib);
      if (!lib.ok()) return report_error("submit", lib.status().with_context("--lib"));
      spec.library = lib->checksum;
    }
    TROUPE_RETURN_IF_ERROR_CLI(finish_submit_spec(**store, spec, f->workers_flag->count() > 0), "submit");

    gcs::JobRecord job = new_job_record(JobId::random(), spec);
    TROUPE_RETURN_IF_ERROR_CLI(gcs::Table<gcs::JobRecord>(**store).put(job), "submit");

    auto hp = actors::parse_host_port(info->head_address);
    if (!hp.ok()) return report_error("submit", hp.status());
    auto sys = actors::ActorSystem::start(actors::ActorSystemOptions{});
    if (!sys.ok()) return report_error("submit", sys.status());
    auto head = (*sys)->connect(hp->first, hp->second);
    if (!head.ok()) return report_error("submit", head.status().with_context("reaching the head"));
    auto reply = actors::request_blocking<actors::SubmitJobReply>((*sys)->system(), *head, std::chrono::seconds(60),
                                                                  submit_message(job.id, spec),
                                                                  "submitting job " + job.id.short_hex());
    if (!reply.ok()) return report_error("submit", reply.status());
    if (f->detach) {
      if (f->train.json) {
        std::printf("%s\n", nlohmann::json{{"job_id", job.id.hex()}, {"started", reply->started},
                                           {"pending_reason", reply->pending_reason}}.dump().c_str());
      } else {
        std::printf("%s\n", job.id.hex().c_str());
      }
      return 0;
    }
    std::fprintf(stderr, "job %s submitted (%s, %d workers%s); `troupe stop %s` stops it\n", job.id.short_hex().c_str(),
                 spec.strategy.c_str(), spec.workers, spec.ps ? (", " + std::to_string(spec.ps) + " ps").c_str() : "",
                 job.id.short_hex().c_str());
    FollowOptions fo;
    fo.progress = global.config.progress && !f->train.no_progress;
    fo.progress_interval_ms = global.config.progress_interval_ms;
    fo.pending_timeout = std::chrono::milliseconds(static_cast<int64_t>(f->pending_timeout * 1000));
    fo.stall_timeout = std::chrono::milliseconds(static_cast<int64_t>(f->stall_timeout * 1000));
    fo.json = f->train.json;
    fo.outage_grace = std::chrono::milliseconds(global.config.outage_grace_ms);
    return follow_job(**store, job.id, fo);
  };
}

}  // namespace troupe::cli
