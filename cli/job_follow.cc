#include "cli/job_follow.h"

#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "gcs/events.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::cli {
namespace {

// A prediction job's summary: what `troupe predict` prints in one process, plus the job.
void print_predict_summary(const gcs::JobRecord& j, nlohmann::json r, bool json) {
  r["job_id"] = j.id.hex();
  if (json) {
    std::printf("%s\n", r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::printf("job %s: %s: %lld rows x %lld outputs into %s, %s rows/s with %d workers, %.2f s\n",
              j.id.short_hex().c_str(), r.value("model", std::string("?")).c_str(),
              static_cast<long long>(r.value("rows", int64_t{0})), static_cast<long long>(r.value("outputs", int64_t{0})),
              r.value("out", std::string("?")).c_str(), format_count(r.value("rows_per_second", 0.0)).c_str(), j.workers,
              r.value("wall_seconds", 0.0));
  if (r.contains("accuracy")) std::printf("accuracy %.4f\n", r.value("accuracy", 0.0));
  if (r.contains("mse")) std::printf("mean squared error %.6g\n", r.value("mse", 0.0));
  if (r.contains("loss"))
    std::printf("next-token loss %.4f nats per token\n", r.value("loss", 0.0));
  if (r.contains("note")) std::printf("note: %s\n", r.value("note", std::string()).c_str());
}

void print_summary(const gcs::JobRecord& j, bool json) {
  nlohmann::json r = nlohmann::json::parse(j.result, nullptr, false);
  if (r.is_discarded() || !r.is_object()) {
    std::printf("job %s succeeded: %s\n", j.id.short_hex().c_str(), j.message.c_str());
    return;
  }
  if (j.strategy == "predict") return print_predict_summary(j, r, json);
  std::printf("job %s: %s with %d workers, model %s: %d epochs, %lld steps\n", j.id.short_hex().c_str(),
              j.strategy.c_str(), j.workers, r.value("model", std::string("?")).c_str(), r.value("epochs", 0),
              static_cast<long long>(r.value("steps", int64_t{0})));
  std::printf("test accuracy %.4f, final loss %.4f, %s samples/s, %.1f s\n", r.value("test_accuracy", 0.0),
              r.value("final_loss", 0.0), format_count(r.value("samples_per_second", 0.0)).c_str(),
              r.value("wall_seconds", 0.0));
  if (json) std::printf("%s\n", r.dump().c_str());
}

}  // namespace

int follow_job(gcs::Store& store, const JobId& id, const FollowOptions& o) {
  ProgressBar bar(o.progress, o.progress_interval_ms);
  using Clock = std::chrono::steady_clock;
  auto last_change = Clock::now();
  int64_t last_updated = -1;
  int epoch_printed = 0;
  std::string last_message;
  bool away = false;  // the GCS has not answered since away_since
  Clock::time_point away_since;
  while (true) {
    auto rec = gcs::Table<gcs::JobRecord>(store).get(id.hex());
    if (!rec.ok()) {
      const Code code = rec.status().code();
      const bool outage = code == Code::unavailable || code == Code::timeout;
      if (outage && !away) {
        away = true;
        away_since = Clock::now();
        bar.println("the GCS does not answer (" + rec.status().message() + "); waiting up to " +
                    std::to_string(o.outage_grace.count() / 1000) + " s for it (the job goes on meanwhile)");
      }
      if (!outage || Clock::now() - away_since > o.outage_grace) {
        bar.finish();
        return report_error(o.command, rec.status().with_context("following job " + id.short_hex()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    if (away) {
      bar.println("the GCS answers again");
      away = false;
      last_change = Clock::now();  // the job could not record anything meanwhile
    }
    const gcs::JobRecord& j = *rec;
    if (j.updated_ms != last_updated) {
      last_updated = j.updated_ms;
      last_change = Clock::now();
    }
    if (j.state == gcs::JobState::pending && j.message != last_message) {
      bar.println("job " + id.short_hex() + " PENDING: " + j.message);
      last_message = j.message;
    }
    // One line per finished epoch (the record carries the latest one; epochs finish far apart).
    if (j.epoch > epoch_printed && j.test_accuracy >= 0 && j.step >= j.epoch * (j.steps / std::max(1, j.epochs))) {
      char line[200];
      std::snprintf(line, sizeof line, "epoch %d/%d: loss %.4f  test acc %.4f  %s samples/s", j.epoch, j.epochs,
                    j.loss, j.test_accuracy, format_count(j.samples_per_second).c_str());
      bar.println(line);
      epoch_printed = j.epoch;
    }
    if (gcs::job_finished(j.state)) {
      bar.finish();
      if (j.state == gcs::JobState::succeeded) {
        print_summary(j, o.json);
        return 0;
      }
      return report_error(o.command, Status(Code::unavailable, "job " + id.short_hex() + " " +
                                                                  gcs::job_state_name(j.state) + ": " + j.message));
    }
    if (j.state == gcs::JobState::running && j.steps > 0 && j.strategy == "predict") {
      char status[160];
      std::snprintf(status, sizeof status, "%s rows  %s rows/s  ETA %s", format_count(static_cast<double>(j.step)).c_str(),
                    format_count(j.samples_per_second).c_str(), format_duration(j.eta_seconds).c_str());
      bar.update("predict", j.step, j.steps, status);
    } else if (j.state == gcs::JobState::running && j.steps > 0) {
      char label[32], status[160];
      std::snprintf(label, sizeof label, "epoch %d/%d", std::max(1, j.epoch), j.epochs);
      std::snprintf(status, sizeof status, "loss %.4f  %s samples/s  ETA %s", j.loss,
                    format_count(j.samples_per_second).c_str(), format_duration(j.eta_seconds).c_str());
      bar.update(label, j.step, j.steps, status);
    }
    const auto quiet = Clock::now() - last_change;
    if (j.state == gcs::JobState::pending && quiet > o.pending_timeout) {
      bar.finish();
      return report_error(o.command, Status(Code::timeout, "job " + id.short_hex() + " is still PENDING after " +
                                                              std::to_string(o.pending_timeout.count() / 1000) +
                                                              " s (" + j.message + "); it stays queued: `troupe stop " +
                                                              id.short_hex() + "` drops it"));
    }
    if (j.state == gcs::JobState::running && quiet > o.stall_timeout) {
      bar.finish();
      return report_error(o.command, Status(Code::timeout, "job " + id.short_hex() + " recorded nothing for " +
                                                              std::to_string(o.stall_timeout.count() / 1000) +
                                                              " s; see `troupe logs " + id.short_hex() + "`"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Expected<JobId> find_job(gcs::Store& store, const std::string& prefix) {
  if (prefix.size() < 4 || prefix.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return invalid_argument("'" + prefix + "' is not a job id (at least 4 hex digits, as troupe status prints them)");
  }
  auto jobs = gcs::Table<gcs::JobRecord>(store).list();
  if (!jobs.ok()) return jobs.status();
  std::vector<JobId> hits;
  for (const gcs::JobRecord& j : *jobs) {
    if (j.id.hex().rfind(prefix, 0) == 0) hits.push_back(j.id);
  }
  if (hits.empty()) return not_found("no job " + prefix + " (troupe status lists the jobs)");
  if (hits.size() > 1) return invalid_argument("job id " + prefix + " is ambiguous: give more digits");
  return hits.front();
}

}  // namespace troupe::cli
