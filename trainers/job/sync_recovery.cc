#include "trainers/job/sync_recovery.h"

#include <spdlog/spdlog.h>

#include "gcs/data_accounting.h"
#include "gcs/events.h"
#include "gcs/job_recovery.h"
#include "gcs/tables.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "data/shards/shard_ledger.h"
#include "trainers/job/job_checkpoint.h"

namespace troupe::job {
namespace {

// (epoch, steps of it done) after `step` global steps: step 0 is (1, 0); an epoch's last step
// leaves (e, steps_per_epoch).
std::pair<int, int64_t> position(int64_t step, int64_t steps_per_epoch) {
  if (step <= 0) return {1, 0};
  const int64_t epoch = (step - 1) / steps_per_epoch + 1;
  return {static_cast<int>(epoch), step - (epoch - 1) * steps_per_epoch};
}

}  // namespace

Expected<StartChoice> choose_start(gcs::Store& store, const JobSpec& spec, const JobId& job) {
  auto own = checkpoint::latest_good_checkpoint(store, job);
  if (own.ok()) return StartChoice{1, own->step};
  if (own.status().code() != Code::not_found) return own.status().with_context("looking for the job's newest checkpoint");
  if (!spec.resume_job.empty()) return StartChoice{2, spec.resume_step};
  return StartChoice{};
}

Status broadcast_start_choice(collectives::Communicator& comm, StartChoice* c, std::chrono::milliseconds timeout) {
  // [kind, step >> 20, step & 0xfffff]: each part exact in f32.
  float v[3] = {static_cast<float>(c->kind), static_cast<float>(c->step >> 20), static_cast<float>(c->step & 0xfffff)};
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  TROUPE_RETURN_IF_ERROR(comm.broadcast(v, 3, DType::f32, 0, co).with_context("agreeing on the start point"));
  c->kind = static_cast<int>(v[0]);
  c->step = (static_cast<int64_t>(v[1]) << 20) | static_cast<int64_t>(v[2]);
  return {};
}

namespace {

// The manifest the choice names ("" job when none) and the text naming it.
Expected<checkpoint::Manifest> chosen_manifest(gcs::Store& store, const JobSpec& spec, const JobId& job,
                                               const StartChoice& c, std::string* from_job) {
  *from_job = c.kind == 1 ? job.hex() : spec.resume_job;
  const std::string step = std::to_string(c.step);
  auto record = gcs::Table<gcs::CheckpointRecord>(store).get(*from_job + "/" + step);
  if (!record.ok()) return record.status().with_context("the checkpoint of step " + step + " to start from");
  return checkpoint::from_record(*record);
}

template <typename Load>
Expected<StartPoint> load_with(gcs::Store& store, const JobSpec& spec, const JobId& job, const StartChoice& c,
                               Load load) {
  StartPoint start;
  if (c.kind == 0) return start;
  std::string from_job;
  auto manifest = chosen_manifest(store, spec, job, c, &from_job);
  if (!manifest.ok()) return manifest.status();
  const std::string step = std::to_string(c.step);
  Expected<checkpoint::TrainingState> state = load(*manifest);
  if (!state.ok()) return state.status().with_context("starting from job " + from_job.substr(0, 8) + "'s step " + step);
  start.state = std::move(*state);
  start.manifest = std::move(*manifest);
  start.own = c.kind == 1;
  start.source = "job " + from_job.substr(0, 8) + " step " + step;
  return start;
}

}  // namespace

Expected<StartPoint> load_start(gcs::Store& store, const JobSpec& spec, const JobId& job, const StartChoice& c) {
  return load_with(store, spec, job, c, [](const checkpoint::Manifest& m) { return checkpoint::load_checkpoint(m); });
}

Expected<StartPoint> load_start_range(gcs::Store& store, const JobSpec& spec, const JobId& job, const StartChoice& c,
                                      size_t total, size_t begin, size_t end, int hint) {
  return load_with(store, spec, job, c, [&](const checkpoint::Manifest& m) {
    return checkpoint::load_range(m, total, begin, end, hint);
  });
}

Expected<StartPoint> agree_start_point(gcs::Store& store, const JobSpec& spec, const JobId& job,
                                       collectives::Communicator& comm, std::chrono::milliseconds timeout,
                                       bool step_only) {
  StartChoice c;
  if (comm.rank() == 0) {
    auto chosen = choose_start(store, spec, job);
    if (!chosen.ok()) return chosen.status();
    c = *chosen;
  }
  TROUPE_RETURN_IF_ERROR(broadcast_start_choice(comm, &c, timeout));
  if (step_only)
    return load_with(store, spec, job, c, [](const checkpoint::Manifest& m) { return checkpoint::read_position(m); });
  return load_start(store, spec, job, c);
}

Expected<StartPoint> find_start_point(gcs::Store& store, const JobSpec& spec, const JobId& job) {
  auto c = choose_start(store, spec, job);
  if (!c.ok()) return c.status();
  return load_start(store, spec, job, *c);
}

Status rewind_to(gcs::Store& store, const JobId& job, int shards, int64_t steps_per_epoch, const StartPoint& start) {
  const int64_t step = start.state && start.own ? start.state->step : 0;
  auto [epoch, done] = position(step, steps_per_epoch);
  const int first_epoch = done >= steps_per_epoch ? epoch + 1 : epoch;
  Expected<int> reset = 0;
  if (shards > 0) {
    data::ShardLedger ledger(store, job, data::ShardLedgerOptions{shards});
    reset = ledger.rewind(first_epoch);
    if (!reset.ok()) return reset.status().with_context("rewinding the shard ledger");
  }
  auto dropped = gcs::discard_ranges_after(store, job, step);
  if (!dropped.ok()) return dropped.status().with_context("rewinding the trained ranges");
  spdlog::info("job {}: restarting from {}: {} shards from epoch {} on and {} trained ranges after step {} rewound",
               job.short_hex(), start.source.empty() ? "the beginning" : start.source, *reset, first_epoch, *dropped,
               step);
  gcs::Event e;
  e.kind = "shards_moved";
  e.subject = job.hex();
  const std::string from = start.source.empty() ? "the beginning" : start.source;
  e.message = shards > 0 ? "job " + job.short_hex() + ": " + std::to_string(*reset) + " shards from epoch " +
                               std::to_string(first_epoch) + " on back to the ledger, to be trained again from " + from
                         : "job " + job.short_hex() + ": the batches after step " + std::to_string(step) +
                               " (epoch " + std::to_string(first_epoch) + " on) to be trained again from " + from;
  Status st = gcs::record_event(store, e);
  if (!st.ok()) spdlog::warn("job {}: recording shards_moved: {}", job.short_hex(), st.to_string());
  return {};
}

Status rewind_after_restart(gcs::Store& store, const JobId& job, int workers, int64_t steps_per_epoch,
                            const StartPoint& start, collectives::Communicator& comm,
                            std::chrono::milliseconds timeout) {
  if (comm.rank() == 0) TROUPE_RETURN_IF_ERROR(rewind_to(store, job, workers, steps_per_epoch, start));
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  return comm.barrier(co).with_context("waiting for rank 0 to rewind the failed attempt");
}

void add_recovery(nlohmann::json* summary, gcs::Store& store, const JobId& job, const std::string& setting) {
  (*summary)["recovery"] = {{"setting", setting}};
  auto rec = gcs::job_recovery(store, job);
  if (!rec.ok() || !*rec || (*rec)->restarts == 0) return;
  const gcs::JobRecovery& r = **rec;
  nlohmann::json j = {{"setting", setting},           {"restarts", r.restarts},  {"mode", r.mode},
                      {"cause", r.cause},             {"from_step", r.from_step}, {"failed_step", r.failed_step},
                      {"steps_lost", r.steps_lost()}, {"source_rank", r.source_rank},
                      {"bytes_moved", r.bytes_moved}};
  if (r.resumed_ms > 0 && r.failed_ms > 0) j["seconds_to_resume"] = static_cast<double>(r.resumed_ms - r.failed_ms) / 1000.0;
  (*summary)["recovery"] = j;
}

void note_resumed(gcs::Store& store, const JobId& job, int attempt, const std::string& source, int64_t step) {
  gcs::Event e;
  e.kind = "job_resumed";
  e.subject = job.hex();
  e.message = "job " + job.short_hex() + " attempt " + std::to_string(attempt) + " is training again: step " +
              std::to_string(step + 1) + " done, started from " + (source.empty() ? "the beginning" : source);
  Status st = gcs::record_event(store, e);
  if (!st.ok()) spdlog::warn("job {}: recording job_resumed: {}", job.short_hex(), st.to_string());
  st = gcs::note_resumed_at(store, job, attempt, gcs::now_ms(), step);
  if (!st.ok()) spdlog::warn("job {}: recording the resume for /metrics: {}", job.short_hex(), st.to_string());
}

ProgressFn rank0_progress(gcs::Store& store, const JobId& job, int attempt, ProgressReporter& reporter,
                          std::string source, int64_t first_step) {
  bool noted = attempt == 0;
  return [&store, job, attempt, &reporter, source = std::move(source), first_step,
          noted](const TrainProgress& p) mutable {
    reporter.on_progress(p);
    if (noted) return;
    noted = true;  // the first step of a restarted attempt: recovery is over
    note_resumed(store, job, attempt, source, first_step);
  };
}

Status TrainedLog::durable_through(int64_t step) {
  if (step <= done_) return {};
  auto [from_epoch, from_step] = position(done_, steps_per_epoch_);
  auto [to_epoch, to_step] = position(step, steps_per_epoch_);
  TROUPE_RETURN_IF_ERROR(gcs::record_trained(store_, job_, attempt_, from_epoch, from_step, to_epoch, to_step,
                                             steps_per_epoch_, step));
  done_ = step;
  return {};
}

Status commit_trained_checkpoint(gcs::Store& store, const JobId& job, const JobSpec& spec, TrainedLog& trained,
                                 const checkpoint::Manifest& m) {
  TROUPE_RETURN_IF_ERROR(trained.durable_through(m.step));
  return commit_checkpoint(store, job, spec, m, trained.steps_per_epoch());
}

checkpoint::ReplicaCheckpoints replica_checkpoints(gcs::Store& store, const JobId& job, const JobSpec& spec,
                                                   int index, TrainedLog& trained, int64_t* last) {
  checkpoint::ReplicaCheckpoints c;
  if (spec.checkpoint_every <= 0) return c;
  c.every = spec.checkpoint_every;
  c.dir = checkpoint_dir(spec, job);
  c.tag = job.hex();
  if (index == 0) {
    // The manifest, written after every replica's shard is durable (the replicas' barrier).
    c.commit = [&store, job, &spec, &trained, last](const checkpoint::Manifest& m) -> Status {
      TROUPE_RETURN_IF_ERROR(commit_trained_checkpoint(store, job, spec, trained, m));
      *last = m.step;
      return {};
    };
  }
  return c;
}

Expected<StartPoint> start_sync_attempt(gcs::Store& store, const JobSpec& spec, const JobId& job, int attempt,
                                        int shards, int64_t steps_per_epoch, collectives::Communicator& comm,
                                        std::chrono::milliseconds timeout, bool step_only) {
  auto start = agree_start_point(store, spec, job, comm, timeout, step_only);
  if (!start.ok() || attempt == 0) return start;
  TROUPE_RETURN_IF_ERROR(rewind_after_restart(store, job, shards, steps_per_epoch, *start, comm, timeout));
  return start;
}

nlohmann::json sync_summary(const TrainResult& result, const JobSpec& spec, const JobId& job, int attempt,
                            int64_t steps_per_epoch, int workers) {
  nlohmann::json summary = train_result_json(result);
  summary["steps_per_epoch"] = steps_per_epoch;
  summary["attempt"] = attempt;
  summary["trained_ranges"] = spec.resume_job.empty();
  summary["strategy"] = spec.strategy;
  summary["workers"] = workers;
  summary["accumulate"] = spec.train.accumulate;  // micro-batches per step
  summary["last_batch"] = spec.train.pads_last_batch() ? "pad" : "drop";  // an epoch's remainder
  summary["job_id"] = job.hex();
  return summary;
}

void add_start_and_checkpoints(nlohmann::json* summary, const JobSpec& spec, const JobId& job,
                               const StartPoint& start, int64_t last_checkpoint, const std::string& dir) {
  if (start.state) {
    (*summary)["resumed_from"] = {{"job_id", start.own ? job.hex() : spec.resume_job},
                                  {"step", start.state->step},
                                  {"epoch", start.state->epoch},
                                  {"epoch_step", start.state->epoch_step}};
  }
  if (spec.checkpoint_every > 0) {
    (*summary)["checkpoint_every"] = spec.checkpoint_every;
    (*summary)["last_checkpoint_step"] = last_checkpoint;
    (*summary)["checkpoint_dir"] = dir;
  }
}

}  // namespace troupe::job
