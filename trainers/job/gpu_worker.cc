#include "trainers/job/gpu_worker.h"

#include <spdlog/spdlog.h>

#include "actors/gpu_assignment.h"
#include "collectives/device_communicator.h"
#include "collectives/group_rendezvous.h"
#include "trainers/cuda/cuda_replica.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_report.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/job/sync_recovery.h"
#include "trainers/setup/model_file.h"

namespace troupe::job {

Expected<int> worker_gpu(const actors::NodeEnvironment& env, const MemberArgs& a, const JobSpec& spec) {
  const std::vector<int> devices = env.gpus ? env.gpus->devices_of(a.actor) : std::vector<int>{};
  if (devices.empty()) {
    return unavailable("the job asks for " + std::to_string(spec.gpus_per_worker) + " GPU per worker but node " +
                       env.node.short_hex() + " gave this worker none (it offers " +
                       std::to_string(env.gpus ? env.gpus->devices() : 0) + ")");
  }
  return devices.front();
}

Status run_sync_gpu(const actors::NodeEnvironment& env, const MemberArgs& a, JobSetup& s,
                    const std::atomic<bool>& cancel) {
  const JobSpec& spec = s.spec;
  const int world = spec.workers;
  auto gpu = worker_gpu(env, a, spec);
  if (!gpu.ok()) return gpu.status();
  const int device = *gpu;
  const bool saves = a.index == 0 && !spec.train.save_path.empty();
  if (saves) TROUPE_RETURN_IF_ERROR(check_save_target(spec.train.save_path));  // fails now, not after training
  collectives::GroupOptions go = sync_group_options(env, a, spec.transport, world, a.attempt);
  auto tls = data_plane_tls(spec);
  if (!tls.ok()) return tls.status();
  go.tls = *tls;
  auto comm = collectives::form_group(*s.store, go);
  if (!comm.ok()) return comm.status().with_context("forming the job's collective group");
  collectives::Transport* host_transport = &(*comm)->transport();
  const auto timeout = std::chrono::milliseconds(spec.collective_timeout_ms);
  const int64_t steps_per_epoch = s.train().count / spec.train.batch_size;
  // Where to start (the newest checkpoint after a restart, or --resume's) and, after a restart,
  // undo the failed attempt's ledger shards and trained ranges past it.
  auto start = start_sync_attempt(*s.store, spec, a.job, a.attempt, world, steps_per_epoch, **comm, timeout);
  if (!start.ok()) return start.status();
  const int64_t first_step = start->state ? start->state->step : 0;
  TrainedLog trained(*s.store, a.job, a.attempt, steps_per_epoch, first_step);
  collectives::Communicator* host_group = comm->get();  // moved into the staged communicator below

  std::unique_ptr<collectives::DeviceCommunicator> dcomm;
  if (world > 1) {
    const bool nccl = spec.gpus_per_worker >= 1 && collectives::built_with_nccl();
    if (nccl) {
      collectives::GroupOptions ngo = go;
      ngo.name = go.name + "-nccl";
      auto formed = collectives::form_nccl_group(*s.store, ngo, device);
      if (!formed.ok()) return formed.status().with_context("forming the job's NCCL group on GPU " + std::to_string(device));
      dcomm = std::move(*formed);
    } else {
      auto staged = collectives::make_staged_communicator(std::move(*comm), device);
      if (!staged.ok()) return staged.status().with_context("the staged GPU path on GPU " + std::to_string(device));
      dcomm = std::move(*staged);
      host_group = dcomm->host();
    }
  }
  // Declared after dcomm, so it goes first: the transport it names lives in dcomm or comm.
  auto interruptible = a.interrupts ? a.interrupts->add(host_transport) : Interrupts::Registration{};

  const LedgerFeedOptions fo = sync_feed_options(spec.train.seed, spec.train.batch_size, world, a.index, world);
  LedgerFeed feed(s.train(), *s.store, a.job, WorkerId::random(), fo);
  CudaReplica replica;
  replica.device = device;
  replica.comm = dcomm.get();
  replica.feed = &feed;
  replica.timeout = timeout;
  replica.cancel = &cancel;
  replica.host = world > 1 ? host_group : nullptr;
  if (start->state) replica.resume = &*start->state;
  int64_t last_checkpoint = 0;
  // As the CPU workers (job_worker.cc): the same files and records.
  replica.checkpoints = replica_checkpoints(*s.store, a.job, spec, a.index, trained, &last_checkpoint);
  ProgressReporter reporter(*s.store, a.job);
  if (replica.resume) reporter.start_at(first_step);
  ProgressFn progress;
  if (a.index == 0) progress = rank0_progress(*s.store, a.job, a.attempt, reporter, start->source, first_step);
  std::vector<float> trained_params;  // --save: rank 0 writes them, as the CPU replicas' rank 0 does
  auto result = train_replica_cuda(spec.train, s.train(), s.test(), replica, progress, saves ? &trained_params : nullptr);
  if (!result.ok()) {
    if (result.status().code() != Code::unavailable || !cancel.load()) {
      Status st = collectives::record_group_failure(*s.store, go.name, go.generation, result.status());
      (void)st;
    }
    return result.status();
  }
  record_job_metric(*s.store, a.job, a.index, "samples_per_second", result->samples_per_second / world);
  record_job_metric(*s.store, a.job, a.index, "data_wait_ms", feed.data_wait_ms());
  if (a.index != 0) return {};
  if (saves) {
    TROUPE_RETURN_IF_ERROR(save_trained_model(spec.train, s.train(), trained_params, *result));
    spdlog::info("model written to {}", spec.train.save_path);
  }
  TROUPE_RETURN_IF_ERROR(trained.durable_through(result->steps).with_context("recording the trained steps"));
  nlohmann::json summary = sync_summary(*result, spec, a.job, a.attempt, steps_per_epoch, world);
  summary["gpus_per_worker"] = spec.gpus_per_worker;
  summary["gradient_path"] = dcomm ? dcomm->path() : std::string("none (one worker)");
  add_start_and_checkpoints(&summary, spec, a.job, *start, last_checkpoint, replica.checkpoints.dir);
  return record_success(*s.store, a.job, summary, result->test_accuracy);
}

}  // namespace troupe::job
