#include "cli/submit_flags.h"

#include <cstdio>
#include <filesystem>

#include "gcs/events.h"
#include "gcs/tables.h"
#include "trainers/job/job_actors.h"
#include "trainers/job/job_model_file.h"
#include "trainers/job/ps_member.h"
#include "trainers/pipeline/pipeline_options.h"

namespace troupe::cli {
namespace {

// Refuses a job that could never be placed: more CPUs or GPUs than all ALIVE nodes have together.
Status check_capacity(gcs::Store& store, const job::JobSpec& spec, int actors, int servers) {
  auto nodes = gcs::Table<gcs::NodeRecord>(store).list();
  if (!nodes.ok()) return nodes.status();
  double cpus = 0, gpus = 0;
  int alive = 0;
  for (const gcs::NodeRecord& n : *nodes) {
    if (n.state != gcs::NodeState::alive) continue;
    ++alive;
    cpus += n.total.cpus;
    gpus += n.total.gpus;
  }
  const double need_cpus = spec.cpus_per_worker * actors + spec.cpus_per_server * servers;
  const double need_gpus = spec.gpus_per_worker * actors;
  auto fmt = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  // A pipeline's workers are its stages: say so, since each stage must be placed for the job to run.
  const std::string what = spec.strategy == "pipeline"
                               ? std::to_string(actors) + " stage actors (" + std::to_string(spec.stages) +
                                     " stages x " + std::to_string(actors / std::max(spec.stages, 1)) + " replicas)"
                               : std::to_string(actors) + " workers";
  if (need_cpus > cpus + 1e-9) {
    return invalid_argument(what +
                            (servers ? " and " + std::to_string(servers) + " parameter servers" : std::string()) +
                            " need " + fmt(need_cpus) + " cpus; the cluster has " + fmt(cpus) + " on " +
                            std::to_string(alive) + " alive node(s): use fewer --workers, a smaller "
                            "--cpus-per-worker, or add nodes (troupe up --nodes N)");
  }
  if (need_gpus > gpus + 1e-9) {
    return invalid_argument(what + " need " + fmt(need_gpus) + " gpus; the cluster has " +
                            fmt(gpus) + " on " + std::to_string(alive) + " alive node(s)");
  }
  return {};
}

}  // namespace

actors::SubmitJob submit_message(const JobId& id, const job::JobSpec& spec) {
  actors::SubmitJob s;
  s.job_id = id.hex();
  s.max_restarts = spec.max_restarts;
  s.restart_backoff_ms = spec.restart_backoff_ms;
  // async and live sync jobs replace only what failed; the others restart the whole gang.
  s.live_recovery = job::recovers_live(spec);
  s.restart_whole_gang = spec.strategy != "async" && !s.live_recovery;
  s.restore_servers = spec.strategy == "async" && spec.checkpoint_every > 0;
  s.progress_timeout_ms = spec.progress_timeout_ms;
  s.elastic = spec.elastic;
  s.restart_on = spec.restart_on;
  const std::string prefix = "job-" + id.short_hex() + "-";
  for (int r = 0; r < spec.workers; ++r) {
    s.actors.push_back({job::kWorkerActorType, prefix + "worker-" + std::to_string(r), spec.cpus_per_worker,
                        spec.gpus_per_worker, {id.hex(), std::to_string(r)}});
  }
  for (int p = 0; p < job::server_count(spec); ++p) {
    s.actors.push_back({job::kServerActorType, prefix + "ps-" + std::to_string(p), spec.cpus_per_server, 0,
                        {id.hex(), std::to_string(p)}});
  }
  return s;
}


gcs::JobRecord new_job_record(const JobId& id, const job::JobSpec& spec) {
  gcs::JobRecord job;
  job.id = id;
  job.name = spec.name;
  job.strategy = spec.strategy;
  job.workers = spec.workers;
  job.ps = spec.ps;
  job.epochs = spec.train.epochs;
  job.spec = job::to_settings(spec);
  job.submitted_ms = gcs::now_ms();
  job.updated_ms = job.submitted_ms;
  job.message = "submitted";
  return job;
}

Expected<job::JobSpec> flags_spec(SubmitFlags& f) {
  job::JobSpec spec = f.spec;
  spec.progress_timeout_ms = static_cast<int64_t>(f.progress_timeout_s * 1000);
  TROUPE_RETURN_IF_ERROR(finish_train_flags(f.train));
  spec.train = f.train.options;
  return spec;
}

Status finish_submit_spec(gcs::Store& store, job::JobSpec& spec, bool workers_given) {
  if (!spec.checkpoint_dir.empty()) spec.checkpoint_dir = std::filesystem::absolute(spec.checkpoint_dir).string();
  // A pipeline of K stages and no --workers runs one replica.
  if (spec.strategy == "pipeline" && spec.stages > 0 && !workers_given) spec.workers = spec.stages;
  TROUPE_RETURN_IF_ERROR(job::validate(spec));
  TROUPE_RETURN_IF_ERROR(job::ship_model_file(store, spec));  // the nodes need not hold the module file
  if (spec.strategy == "pipeline" && spec.library.empty() && spec.train.data.empty() && spec.train.dataset == "fashion-mnist") {
    // Built-in trainers can be checked here: layers to cut, and enough of them for the stages.
    TROUPE_RETURN_IF_ERROR(pipeline::check_pipeline_model(spec.train, job::pipeline_options(spec), DataSpec{28 * 28, 10}));
  }
  return check_capacity(store, spec, spec.workers, job::server_count(spec));
}

void add_job_flags(CLI::App* cmd, SubmitFlags& f) {
  job::JobSpec& s = f.spec;
  add_train_flags(cmd, f.train, "Examples per step over all workers (the global batch)");
  cmd->add_option("--strategy", s.strategy,
                  "sync (all-reduce), async (parameter servers), central, or pipeline (layers cut into --stages)")
      ->check(CLI::IsMember({"sync", "async", "central", "pipeline"}))->capture_default_str();
  cmd->add_option("--stages", s.stages, "pipeline: stages (one worker each; --workers N gives N/K replicas)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--microbatches", s.microbatches, "pipeline: micro-batches per step and replica")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  cmd->add_option("--schedule", s.schedule, "pipeline: gpipe or 1f1b")
      ->check(CLI::IsMember({"gpipe", "1f1b"}))->capture_default_str();
  cmd->add_option("--stage-layers", s.stage_layers,
                  "pipeline: layers per stage, e.g. 2,1,1,1 (default: balanced by parameter bytes and FLOPs)");
  f.workers_flag = cmd->add_option("--workers", s.workers, "Trainer actors (replicas; pipeline: stage actors)")
                        ->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--ps", s.ps, "Parameter-server actors (async)")->check(CLI::Range(0, 1024));
  cmd->add_option("--staleness", s.staleness, "async: steps a worker may run ahead of the slowest (default: unbounded)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--shard-policy", s.shard_policy,
                  "How async workers' shards are cut: auto (stratified for one class per example, else interleaved), "
                  "contiguous, stratified, interleaved")
      ->check(CLI::IsMember({"auto", "contiguous", "stratified", "interleaved"}))->capture_default_str();
  cmd->add_option("--cpus-per-worker", s.cpus_per_worker, "CPUs each worker needs")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--gpus-per-worker", s.gpus_per_worker, "GPUs each worker needs")->check(CLI::NonNegativeNumber);
  cmd->add_option("--cpus-per-ps", s.cpus_per_server, "CPUs each parameter server needs (async, central)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--transport", s.transport, "sync: auto, shm, tcp or hierarchical")
      ->check(CLI::IsMember({"auto", "shm", "tcp", "hierarchical"}))->capture_default_str();
  cmd->add_option("--data-plane", s.data_plane,
                  "The workers' and parameter servers' connections: auto (TLS on a `troupe up --tls` cluster), tls "
                  "(required), plain (TCP: faster, readable on the network)")
      ->check(CLI::IsMember({"auto", "tls", "plain"}))->capture_default_str();
  cmd->add_option("--checksum-every", s.checksum_every, "sync: steps between parameter checksums (0: never)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--bucket-bytes", s.bucket_bytes,
                  "sync: gradient bucket size; buckets are all-reduced while backward runs (0: one all-reduce "
                  "after backward; -1: 256 KiB where the node has 2 cores per worker, else 0)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40))->capture_default_str();
  cmd->add_option("--grad-wire,--reduce-dtype", s.grad_wire,
                  "sync: gradients travel (and are reduced) as f32, bf16 or f16 (half the bytes), or auto: the "
                  "--precision's type between hosts, f32 over shared memory and for --shard jobs")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))->capture_default_str();
  cmd->add_option("--shard", s.shard,
                  "sync: what each worker keeps only its 1/N of: none, optimizer (its optimizer state; gradients "
                  "reduce-scattered, parameters all-gathered: ZeRO 1), gradients (also the gradients: ZeRO 2) or "
                  "parameters (also the parameters, each layer gathered when used: ZeRO 3; models with layers)")
      ->check(CLI::IsMember({"none", "optimizer", "gradients", "parameters"}))->capture_default_str();
  cmd->add_option("--checkpoint-every", s.checkpoint_every,
                  "a sharded checkpoint every STEPS steps (sync, central, pipeline; async: every STEPS x workers "
                  "updates, and a dead parameter server is restored from it; 0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--checkpoint-dir", s.checkpoint_dir,
                  "Where checkpoints go (<dir>/<job id>/step-N/); every worker must be able to write it");
  cmd->add_option("--checkpoint-keep", s.checkpoint_keep, "How many of the newest checkpoints to keep")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--max-restarts", s.max_restarts,
                  "Restarts after failures (a worker or server killed, its node lost, an exception) before the "
                  "job fails; sync restarts every worker from the newest checkpoint, async replaces the failed actor")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_option("--restart-backoff", s.restart_backoff_ms,
                  "Milliseconds before a restart, doubled for each failure that comes before the job got past the "
                  "step of the one before (a crash loop; at most 30 s), back to this once it did")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))->capture_default_str();
  cmd->add_option("--restart-on", s.restart_on,
                  "Where a restart places what it restarts: any (a node with room), same (each on the node it ran "
                  "on, unless that node is gone), other (the failed actor on another node than its own)")
      ->check(CLI::IsMember({"any", "same", "other"}))->capture_default_str();
  cmd->add_option("--progress-timeout", f.progress_timeout_s,
                  "sync, central: restart the job when its step count stands still this many seconds (a hung "
                  "worker; 0: never)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_flag("--elastic", s.elastic,
               "sync: after a failure go on with the workers that fit (each training several of the epoch's "
               "shards, same updates) instead of waiting for room for all, and grow back once there is room (live "
               "recovery: at once, from the survivors' memory; checkpoint: after the next checkpoint)");
  cmd->add_option("--recovery", s.recovery,
                  "sync, pipeline: after a worker is lost, live (the others keep their state in memory and hand it "
                  "to its replacement: no completed step lost), checkpoint (every worker restarts from the newest "
                  "checkpoint), or auto (live where built: CPU sync jobs, --shard or --elastic but not both; "
                  "pipelines)")
      ->check(CLI::IsMember({"auto", "live", "checkpoint"}))->capture_default_str();
  cmd->add_option("--mirror-every", s.mirror_every,
                  "sync --shard, or a pipeline of one replica, with live recovery: each worker sends a copy of its "
                  "shard of the state (a stage: its layers' state) to a neighbour (on another node where it can) "
                  "every this many steps; a lost worker's share comes back from that copy (the job rolls back to it "
                  "in memory)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--mirror-overlap", s.mirror_overlap,
                  "sync --shard with live recovery: send each copy beside the next step (on: a thread and a second "
                  "connection per worker), after it (off), or auto (on where the host has 2 hardware threads per "
                  "worker)")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  cmd->add_option("--name", s.name, "A name for the job (shown by troupe status)");

}

}  // namespace troupe::cli
