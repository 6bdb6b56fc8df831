#include "trainers/job/predict_worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "data/npy_writer.h"
#include "gcs/events.h"
#include "gcs/job_table.h"
#include "gcs/predict_accounting.h"
#include "gcs/redis_store.h"
#include "gcs/tables.h"
#include "data/shards/shard_ledger.h"
#include "trainers/job/job_report.h"
#include "trainers/job/predict_assembly.h"
#include "trainers/job/predict_spec.h"

namespace troupe::job {
namespace {

constexpr int kEpoch = 1;  // a prediction job's ledger has one epoch
constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr auto kProgressEvery = std::chrono::milliseconds(250);

void event(gcs::Store& store, const JobId& job, const std::string& kind, const std::string& message) {
  gcs::Event e;
  e.kind = kind;
  e.subject = job.hex();
  e.message = "job " + job.short_hex() + " " + message;
  Status st = gcs::record_event(store, e);
  if (!st.ok()) spdlog::warn("{}: recording {}: {}", e.message, kind, st.to_string());
}

// The rows of DONE shards into the job's record (step of steps, rows/s since submission); best
// effort: progress is information.
void record_progress(gcs::Store& store, const JobId& job, data::ShardLedger& ledger, int64_t rows) {
  auto shards = ledger.epoch_status(kEpoch);
  if (!shards.ok()) return;
  int64_t done = 0;
  for (const gcs::ShardRecord& r : *shards) done += r.state == gcs::ShardState::done ? r.examples : 0;
  auto rec = gcs::update_job(store, job, [&](gcs::JobRecord& j) -> Status {
    if (gcs::job_finished(j.state)) return invalid_argument("ended");
    if (j.step >= done && j.steps == rows) return invalid_argument("no change");
    j.epoch = j.epochs = 1;
    j.steps = rows;
    j.step = std::max(j.step, done);
    j.progress = rows > 0 ? static_cast<double>(j.step) / rows : 0;
    const double seconds = (gcs::now_ms() - j.submitted_ms) / 1000.0;
    j.samples_per_second = seconds > 0 ? j.step / seconds : 0;
    j.eta_seconds = j.samples_per_second > 0 ? (rows - j.step) / j.samples_per_second : 0;
    return {};
  });
  if (!rec.ok() && rec.status().code() != Code::invalid_argument)
    spdlog::warn("job {}: recording progress: {}", job.short_hex(), rec.status().to_string());
}

// One claimed shard: predicted, its part written, recorded, completed.
Status predict_shard(PredictSession& session, const PredictJobSpec& spec, gcs::Store& store,
                     data::ShardLedger& ledger, const MemberArgs& a, WorkerId me, int64_t shard_rows,
                     const gcs::ShardRecord& shard, std::vector<float>* buffer) {
  gcs::PredictedPart part;
  part.job = a.job;
  part.shard = shard.shard;
  part.first_row = static_cast<int64_t>(shard.shard) * shard_rows;
  part.rows = shard.examples;
  part.width = session.width();
  part.owner = me;
  part.attempt = a.attempt;
  part.started_ms = gcs::now_ms();
  buffer->resize(static_cast<size_t>(part.rows * part.width));
  PredictScore score;
  TROUPE_RETURN_IF_ERROR(session.run(part.first_row, part.rows, buffer->data(), &score));
  const std::string path = part_path(spec.parts_dir, shard.shard);
  TROUPE_RETURN_IF_ERROR(data::write_npy(path, buffer->data(), {part.rows, part.width})
                             .with_context("writing the outputs of shard " + std::to_string(shard.shard)));
  part.checksum = outputs_checksum(buffer->data(), part.rows * part.width);
  part.right = score.right;
  part.scored = score.scored;
  part.squared = session.windows() ? score.loss_sum : score.squared;  // (gcs/predict_accounting.h)
  part.finished_ms = gcs::now_ms();
  TROUPE_RETURN_IF_ERROR(gcs::Table<gcs::PredictedPart>(store).put(part).with_context("recording the part"));
  return ledger.complete(kEpoch, shard.shard, me);
}

// Claims and predicts shards until none is UNASSIGNED (or `until_done`: until every one is DONE,
// waiting for shards given back). Returns how many rows it predicted.
Expected<int64_t> predict_shards(PredictSession& session, const PredictJobSpec& spec, gcs::Store& store,
                                 data::ShardLedger& ledger, const MemberArgs& a, WorkerId me, int64_t shard_rows,
                                 int64_t rows, bool until_done, const std::atomic<bool>& cancel) {
  std::vector<float> buffer;
  int64_t mine = 0;
  auto last_move = std::chrono::steady_clock::now();
  int64_t last_done = -1;
  auto last_progress = std::chrono::steady_clock::time_point{};
  while (true) {
    if (cancel.load()) return unavailable("stopped");
    auto claimed = ledger.claim(kEpoch, me);
    if (!claimed.ok()) return claimed.status().with_context("claiming a shard");
    if (claimed->has_value()) {
      const gcs::ShardRecord& s = **claimed;
      Status st = predict_shard(session, spec, store, ledger, a, me, shard_rows, s, &buffer);
      if (!st.ok()) return st.with_context("shard " + std::to_string(s.shard) + " (rows " +
                                           std::to_string(int64_t{s.shard} * shard_rows) + "+)");
      mine += s.examples;
      // At most every kProgressEvery: it reads every shard's record.
      if (std::chrono::steady_clock::now() - last_progress >= kProgressEvery) {
        record_progress(store, a.job, ledger, rows);
        last_progress = std::chrono::steady_clock::now();
      }
      continue;
    }
    if (!until_done) return mine;
    auto shards = ledger.epoch_status(kEpoch);
    if (!shards.ok()) return shards.status().with_context("reading the ledger");
    int64_t done = 0;
    std::string held;
    for (const gcs::ShardRecord& r : *shards) {
      done += r.state == gcs::ShardState::done;
      if (r.state == gcs::ShardState::assigned && held.size() < 200)
        held += (held.empty() ? "" : ", ") + std::to_string(r.shard) + " (owner " + r.owner.short_hex() + ")";
    }
    if (done == static_cast<int64_t>(shards->size())) return mine;
    const auto now = std::chrono::steady_clock::now();
    if (done != last_done) {
      if (last_done >= 0) record_progress(store, a.job, ledger, rows);
      last_done = done;
      last_move = now;
    } else if (now - last_move > std::chrono::milliseconds(spec.wait_timeout_ms)) {
      return Status(Code::timeout, "waited " + std::to_string(spec.wait_timeout_ms / 1000) + " s for the other " +
                                       "predictors' shards and none finished; still held: " + held +
                                       " (see troupe logs " + a.job.short_hex() + ")");
    }
    std::this_thread::sleep_for(kPoll);  // polling the ledger, bounded by the wait above
  }
}

// Predictor 0 once every shard is DONE: the output, the accounting's "assembled" marks, SUCCEEDED.
Status assemble_and_finish(PredictSession& session, const PredictJobSpec& spec, gcs::Store& store,
                           const MemberArgs& a, int shards, int64_t rows) {
  auto parts = gcs::predicted_parts(store, a.job);
  if (!parts.ok()) return parts.status().with_context("reading the predicted parts");
  if (static_cast<int>(parts->size()) != shards)
    return internal_error("every shard is DONE but " + std::to_string(parts->size()) + " of " +
                          std::to_string(shards) + " parts are recorded");
  TROUPE_RETURN_IF_ERROR(assemble_parts(spec.parts_dir, *parts, rows, session.width(), spec.predict.out)
                             .with_context("assembling " + spec.predict.out));
  PredictScore score;
  int64_t first_ms = INT64_MAX, last_ms = 0;
  for (gcs::PredictedPart& p : *parts) {
    score.right += p.right;
    score.scored += p.scored;
    (session.windows() ? score.loss_sum : score.squared) += p.squared;
    first_ms = std::min(first_ms, p.started_ms);
    last_ms = std::max(last_ms, p.finished_ms);
    p.assembled = true;
    TROUPE_RETURN_IF_ERROR(gcs::Table<gcs::PredictedPart>(store).put(p).with_context("recording the assembly"));
  }
  std::error_code ec;
  std::filesystem::remove_all(spec.parts_dir, ec);  // the output holds them now
  const double seconds = std::max(1e-3, (last_ms - first_ms) / 1000.0);
  nlohmann::json summary{{"kind", "predict"}, {"model", session.model()}, {"rows", rows}, {"outputs", session.width()},
                         {"out", spec.predict.out}, {"workers", spec.workers}, {"shards", shards},
                         {"predict_seconds", seconds}, {"rows_per_second", rows / seconds}};
  const double accuracy = session.accuracy(score), mse = session.mse(score), loss = session.loss(score);
  if (accuracy >= 0) summary["accuracy"] = accuracy;
  if (mse >= 0) summary["mse"] = mse;
  if (loss >= 0) summary["loss"] = loss;
  if (!session.note().empty()) summary["note"] = session.note();
  std::string message = "done: " + std::to_string(rows) + " rows predicted into " + spec.predict.out;
  if (accuracy >= 0) message += ", accuracy " + std::to_string(accuracy);
  auto rec = gcs::update_job(store, a.job, [&](gcs::JobRecord& j) -> Status {
    TROUPE_RETURN_IF_ERROR(gcs::finish_job(gcs::JobState::succeeded, message)(j));
    summary["wall_seconds"] = (gcs::now_ms() - j.submitted_ms) / 1000.0;
    j.result = summary.dump();
    j.test_accuracy = accuracy;
    j.step = j.steps = rows;
    j.progress = 1;
    j.samples_per_second = rows / seconds;
    j.eta_seconds = 0;
    return {};
  });
  if (!rec.ok()) return rec.status().with_context("recording the result");
  event(store, a.job, "job_succeeded", message);
  return {};
}

}  // namespace

Status run_predictor(const actors::NodeEnvironment& env, const MemberArgs& a, const std::atomic<bool>& cancel) {
  const std::string who = "job " + a.job.short_hex() + " predictor " + std::to_string(a.index);
  auto connected = gcs::RedisStore::connect(env.gcs);
  if (!connected.ok()) return connected.status().with_context(who + ": connecting to the GCS");
  gcs::Store& store = **connected;
  auto record = gcs::Table<gcs::JobRecord>(store).get(a.job.hex());
  if (!record.ok()) return record.status().with_context(who);
  auto spec = predict_spec_from_settings(record->spec);
  if (!spec.ok()) return spec.status().with_context(who + ": the job's spec");
  TROUPE_RETURN_IF_ERROR(validate(*spec).with_context(who));
  auto session = PredictSession::open(spec->predict);
  if (!session.ok()) return session.status().with_context(who + ": loading the model and data on node " + env.node.short_hex());
  const int64_t rows = (*session)->rows();
  const int64_t shard_rows = shard_rows_for(*spec, rows);
  const int shards = shard_count(rows, shard_rows);
  data::ShardLedger ledger(store, a.job, data::ShardLedgerOptions{shards});
  std::vector<int64_t> sizes(static_cast<size_t>(shards));
  for (int s = 0; s < shards; ++s) sizes[static_cast<size_t>(s)] = std::min(shard_rows, rows - s * shard_rows);
  TROUPE_RETURN_IF_ERROR(ledger.create_epoch(kEpoch, sizes).with_context(who + ": recording the shards"));
  std::error_code ec;
  std::filesystem::create_directories(spec->parts_dir, ec);
  if (ec) return io_error(who + ": creating " + spec->parts_dir + ": " + ec.message());
  const WorkerId me = gcs::predictor_identity(a.job, a.index);
  if (a.attempt > 0) {
    // A replacement: what the dead predecessor of this slot held goes back to the ledger, whole
    // (its part was never recorded: it died before it finished the shard).
    auto released = ledger.release_worker(me);
    if (!released.ok()) return released.status().with_context(who + ": giving back its predecessor's shards");
    std::string list;
    for (const gcs::ShardRecord& r : *released) list += (list.empty() ? "" : ", ") + std::to_string(r.shard);
    event(store, a.job, "shards_moved",
          "predictor " + std::to_string(a.index) + " (attempt " + std::to_string(a.attempt) + ") gave back " +
              std::to_string(released->size()) + " shard(s) its predecessor held" +
              (list.empty() ? "" : ": " + list) + "; predicted again from their first row");
  }
  spdlog::info("{}: {} over {} rows in {} shards of {} on node {}", who, (*session)->model(), rows, shards, shard_rows,
               env.node.short_hex());
  const auto start = std::chrono::steady_clock::now();
  auto mine = predict_shards(**session, *spec, store, ledger, a, me, shard_rows, rows, a.index == 0, cancel);
  if (!mine.ok()) return mine.status().with_context(who);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record_job_metric(store, a.job, a.index, "rows_predicted", static_cast<double>(*mine));
  record_job_metric(store, a.job, a.index, "samples_per_second", seconds > 0 ? *mine / seconds : 0);
  if (a.index != 0) return {};
  return assemble_and_finish(**session, *spec, store, a, shards, rows).with_context(who);
}

}  // namespace troupe::job
