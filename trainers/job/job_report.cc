#include "trainers/job/job_report.h"

#include <spdlog/spdlog.h>

#include "gcs/events.h"
#include "gcs/job_epochs.h"
#include "gcs/job_table.h"

namespace troupe::job {

nlohmann::json train_result_json(const TrainResult& r) {
  nlohmann::json history = nlohmann::json::array();
  for (const EpochStats& e : r.history) {
    history.push_back({{"epoch", e.epoch}, {"train_loss", e.train_loss}, {"train_accuracy", e.train_accuracy},
                       {"test_accuracy", e.test_accuracy}, {"test_loss", e.test_loss}, {"seconds", e.seconds},
                       {"samples_per_second", e.samples_per_second}});
  }
  return {{"test_accuracy", r.test_accuracy}, {"test_loss", r.test_loss}, {"final_loss", r.final_loss},
          {"samples_per_second", r.samples_per_second}, {"epochs", r.epochs}, {"steps", r.steps},
          {"wall_seconds", r.wall_seconds}, {"model", r.model}, {"device", r.device}, {"precision", r.precision},
          {"overflow_steps", r.overflow_steps}, {"loss_scale", r.loss_scale}, {"history", history}};
}

void ProgressReporter::on_progress(const TrainProgress& p) {
  const auto now = std::chrono::steady_clock::now();
  if (p.epoch_done) {
    steps_before_epoch_ = static_cast<int64_t>(p.epoch) * p.steps_per_epoch;  // (also right for a resumed job)
    last_test_accuracy_ = p.last_epoch.test_accuracy;
    record_job_metric(store_, job_, -1, "train_loss", p.last_epoch.train_loss);
    record_job_metric(store_, job_, -1, "train_accuracy", p.last_epoch.train_accuracy);
    if (p.last_epoch.test_accuracy >= 0) record_job_metric(store_, job_, -1, "test_accuracy", p.last_epoch.test_accuracy);
    if (p.last_epoch.test_loss >= 0) record_job_metric(store_, job_, -1, "test_loss", p.last_epoch.test_loss);
    record_job_metric(store_, job_, -1, "samples_per_second", p.last_epoch.samples_per_second);
    gcs::EpochResult line;
    line.epoch = p.epoch;
    line.train_loss = p.last_epoch.train_loss;
    line.train_accuracy = p.last_epoch.train_accuracy;
    line.test_accuracy = p.last_epoch.test_accuracy;
    line.test_loss = p.last_epoch.test_loss;
    line.seconds = p.last_epoch.seconds;
    Status st = gcs::record_job_epoch(store_, job_, line);
    if (!st.ok()) spdlog::warn("job {}: recording epoch {}: {}", job_.short_hex(), p.epoch, st.to_string());
  } else if (now - last_ < interval_) {
    return;
  }
  last_ = now;
  const int64_t steps_total = p.steps_per_epoch * p.epochs;
  const int64_t done = p.epoch_done ? steps_before_epoch_ : steps_before_epoch_ + p.step;
  auto rec = gcs::update_job(store_, job_, [&](gcs::JobRecord& j) -> Status {
    if (gcs::job_finished(j.state)) return invalid_argument("ended");
    j.epoch = p.epoch;
    j.epochs = p.epochs;
    j.step = done;
    j.steps = steps_total;
    j.progress = steps_total > 0 ? static_cast<double>(done) / steps_total : 0;
    if (!p.epoch_done) {
      j.loss = p.loss;
      j.samples_per_second = p.samples_per_second;
      j.eta_seconds = p.eta_seconds;
    } else {
      j.loss = p.last_epoch.train_loss;
      j.samples_per_second = p.last_epoch.samples_per_second;
    }
    j.test_accuracy = last_test_accuracy_;
    return {};
  });
  if (!rec.ok() && rec.status().code() != Code::invalid_argument) {
    spdlog::warn("job {}: recording progress: {}", job_.short_hex(), rec.status().to_string());
  }
}

void record_job_metric(gcs::Store& store, const JobId& job, int rank, const std::string& name, double value) {
  gcs::Metric m;
  m.name = "job/" + job.hex() + (rank >= 0 ? "/worker/" + std::to_string(rank) : "") + "/" + name;
  m.value = value;
  Status st = gcs::record_metric(store, m);
  if (!st.ok()) spdlog::warn("job {}: recording metric {}: {}", job.short_hex(), name, st.to_string());
}

Status record_success(gcs::Store& store, const JobId& job, const nlohmann::json& summary, double test_accuracy) {
  auto rec = gcs::update_job(store, job, [&](gcs::JobRecord& j) -> Status {
    TROUPE_RETURN_IF_ERROR(gcs::finish_job(gcs::JobState::succeeded, "done: test accuracy " +
                                                                         std::to_string(test_accuracy))(j));
    j.result = summary.dump();
    j.test_accuracy = test_accuracy;
    j.step = j.steps;
    j.eta_seconds = 0;
    return {};
  });
  if (!rec.ok()) return rec.status();
  gcs::Event e;
  e.kind = "job_succeeded";
  e.subject = job.hex();
  e.message = "job " + job.short_hex() + " succeeded: test accuracy " + std::to_string(test_accuracy);
  return gcs::record_event(store, e);
}

}  // namespace troupe::job
