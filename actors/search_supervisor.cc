#include "actors/search_supervisor.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include <spdlog/spdlog.h>

#include "gcs/events.h"
#include "gcs/job_epochs.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"
#include "tune/asha.h"

namespace troupe::actors {
namespace {

bool maximize(const gcs::SearchRecord& s) { return s.mode != "min"; }

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

void search_event(gcs::Store& store, const gcs::SearchRecord& s, const std::string& kind, const std::string& message) {
  Status st = gcs::record_event(store, {0, kind, s.id.hex(), message});
  if (!st.ok()) spdlog::warn("search {}: recording {}: {}", s.id.short_hex(), kind, st.to_string());
}

}  // namespace

bool SearchSupervisor::tick() {
  auto searches = gcs::list_searches(store_);
  if (!searches.ok()) {
    spdlog::warn("reading the searches: {}", searches.status().to_string());
    return !known_.empty();
  }
  bool running = false;
  for (gcs::SearchRecord& s : *searches) {
    if (gcs::search_finished(s.state)) {
      known_.erase(s.id);
      continue;
    }
    running = true;
    gcs::SearchRecord mine = s;
    if (!advance(mine)) {
      known_[s.id] = mine;
      continue;
    }
    // Written over the record as read unless `troupe tune stop` came in between: then keep its
    // request (the next tick acts on it).
    auto written = gcs::update_search(store_, s.id, [&](gcs::SearchRecord& fresh) -> Status {
      if (fresh.paused) return invalid_argument("paused");  // `troupe down` came in between: leave it
      const bool stop = fresh.stop_requested;
      fresh = mine;
      fresh.stop_requested = stop || mine.stop_requested;
      return {};
    });
    if (!written.ok()) {
      if (written.status().code() != Code::invalid_argument)
        spdlog::warn("search {}: writing its record: {}", s.id.short_hex(), written.status().to_string());
      continue;
    }
    known_[s.id] = *written;
    mirror(*written);
  }
  return running;
}

void SearchSupervisor::on_gcs_lost() {
  for (const auto& [id, s] : known_) {
    Status st = gcs::put_search(store_, s);
    if (!st.ok()) spdlog::warn("search {}: writing it back after the GCS lost its data: {}", id.short_hex(), st.to_string());
  }
}

void SearchSupervisor::mirror(const gcs::SearchRecord& s) {
  Status st = gcs::write_search_file(s);
  if (!st.ok()) spdlog::warn("search {}: {}", s.id.short_hex(), st.to_string());
}

bool SearchSupervisor::advance(gcs::SearchRecord& s) {
  if (s.paused) return false;  // `troupe down` cut it short: `troupe tune --resume` goes on
  bool changed = false;
  for (gcs::TrialRecord& t : s.trials) follow_trial(s, t, &changed);
  if (s.stop_requested) {
    stop_all(s, &changed);
  } else {
    if (s.scheduler == "asha") apply_asha(s, &changed);
    start_waiting(s, &changed);
  }
  if (std::all_of(s.trials.begin(), s.trials.end(), [](const gcs::TrialRecord& t) { return gcs::trial_finished(t.state); })) {
    finish(s);
    changed = true;
  }
  return changed;
}

void SearchSupervisor::follow_trial(gcs::SearchRecord& s, gcs::TrialRecord& t, bool* changed) {
  if (t.state == "WAITING" || gcs::trial_finished(t.state)) return;
  auto job = gcs::Table<gcs::JobRecord>(store_).get(t.job.hex());
  if (!job.ok()) {
    if (job.status().code() != Code::not_found) return;  // the GCS is away: next tick
    // Started, but its record is gone (the head died between the two, or the GCS lost it): again.
    spdlog::info("search {}: trial {}'s job {} has no record; submitting it again", s.id.short_hex(), t.index,
                 t.job.short_hex());
    t.state = "WAITING";
    *changed = true;
    return;
  }
  if (job->state == gcs::JobState::pending && !host_.supervises(t.job)) {
    Status st = host_.start(s, t);  // recorded but never submitted (a head died in between)
    if (!st.ok()) spdlog::warn("search {}: resubmitting trial {}: {}", s.id.short_hex(), t.index, st.to_string());
  }
  // The job's history, after what the trial already had of epochs before it: a job restarted from
  // a checkpoint writes its epochs from there on (a history the GCS lost starts there), one
  // restarted from scratch from epoch 1 (replacing them all).
  auto history = gcs::job_epochs(store_, t.job);
  if (history.ok() && !history->empty()) {
    std::vector<gcs::EpochResult> merged;
    for (const gcs::EpochResult& e : t.epochs)
      if (e.epoch < history->front().epoch) merged.push_back(e);
    merged.insert(merged.end(), history->begin(), history->end());
    const bool same = merged.size() == t.epochs.size() &&
                      std::equal(merged.begin(), merged.end(), t.epochs.begin(), [](const auto& a, const auto& b) {
                        return a.epoch == b.epoch && a.time_ms == b.time_ms;
                      });
    if (!same) {
      t.epochs = std::move(merged);
      *changed = true;
    }
  }
  const std::string state = gcs::job_state_name(job->state);
  if (state != t.state || job->message != t.message) {
    t.state = state;
    if (t.stopped_at == 0 || !gcs::trial_finished(state)) t.message = job->message;
    if (gcs::trial_finished(state)) t.finished_ms = job->finished_ms ? job->finished_ms : gcs::now_ms();
    *changed = true;
  }
}

void SearchSupervisor::apply_asha(gcs::SearchRecord& s, bool* changed) {
  const std::vector<int> rungs = tune::asha_rungs(s.grace, s.eta, s.epochs);
  for (int rung : rungs) {
    // The values already judged at this rung, and the trials that reached it since (in the order
    // they got there: an earlier arrival is judged against fewer).
    std::vector<double> judged;
    std::vector<std::tuple<int64_t, int, double>> arrivals;  // time reached, trial, value
    for (gcs::TrialRecord& t : s.trials) {
      if (t.stopped_at > 0 && t.stopped_at != rung) continue;  // stopped at an earlier rung
      double v = 0;
      if (!gcs::trial_metric(s, t, rung, &v)) continue;
      const bool decided = t.stopped_at == rung || std::count(t.rungs_passed.begin(), t.rungs_passed.end(), rung) > 0;
      if (decided) {
        judged.push_back(v);
        continue;
      }
      int64_t when = 0;
      for (const gcs::EpochResult& e : t.epochs)
        if (e.epoch == rung) when = e.time_ms;
      arrivals.emplace_back(when, t.index, v);
    }
    std::sort(arrivals.begin(), arrivals.end());
    for (const auto& [when, index, value] : arrivals) {
      gcs::TrialRecord& t = s.trials[static_cast<size_t>(index)];
      const bool keep = gcs::trial_finished(t.state) || t.stopped_at > 0 ||
                        tune::asha_keeps(judged, value, s.eta, maximize(s));
      if (keep) {
        t.rungs_passed.push_back(rung);
      } else {
        const double cut = tune::asha_cutoff(judged, value, s.eta, maximize(s));
        const size_t rung_no = static_cast<size_t>(std::find(rungs.begin(), rungs.end(), rung) - rungs.begin()) + 1;
        const std::string why = "stopped early at rung " + std::to_string(rung_no) + " (epoch " + std::to_string(rung) +
                                "): " + s.metric + " " + fmt(value) + ", the top 1/" + std::to_string(s.eta) + " of " +
                                std::to_string(judged.size() + 1) + " trials there reach " + fmt(cut);
        t.stopped_at = rung;
        t.message = why;
        Status st = host_.stop(t.job, why);
        if (!st.ok()) spdlog::warn("search {}: stopping trial {}: {}", s.id.short_hex(), t.index, st.to_string());
        t.state = "CANCELLED";
        t.finished_ms = gcs::now_ms();
        search_event(store_, s, "trial_stopped", "search " + s.id.short_hex() + " trial " + std::to_string(t.index) +
                                                     " (" + gcs::describe_settings(t) + ") " + why);
      }
      judged.push_back(value);
      *changed = true;
    }
  }
}

void SearchSupervisor::start_waiting(gcs::SearchRecord& s, bool* changed) {
  int active = 0;
  for (const gcs::TrialRecord& t : s.trials) active += (t.state == "PENDING" || t.state == "RUNNING") ? 1 : 0;
  for (gcs::TrialRecord& t : s.trials) {
    if (t.state != "WAITING") continue;
    if (s.max_concurrent > 0 && active >= s.max_concurrent) break;
    Status st = host_.start(s, t);
    if (!st.ok() && (st.code() == Code::unavailable || st.code() == Code::timeout)) {
      // The GCS did not answer: the trial waits for the next tick.
      spdlog::warn("search {}: submitting trial {}: {} (trying again)", s.id.short_hex(), t.index, st.to_string());
      break;
    }
    if (!st.ok()) {
      // The job supervisor refused it (a bad submission: it would refuse every time): the trial fails.
      t.state = "FAILED";
      t.message = "could not be submitted: " + st.to_string();
      t.finished_ms = gcs::now_ms();
      *changed = true;
      continue;
    }
    t.state = "PENDING";
    t.started_ms = gcs::now_ms();
    ++active;
    *changed = true;
  }
}

void SearchSupervisor::stop_all(gcs::SearchRecord& s, bool* changed) {
  for (gcs::TrialRecord& t : s.trials) {
    if (gcs::trial_finished(t.state)) continue;
    if (t.state != "WAITING") {
      Status st = host_.stop(t.job, "the search was stopped");
      if (!st.ok() && st.code() != Code::not_found)
        spdlog::warn("search {}: stopping trial {}: {}", s.id.short_hex(), t.index, st.to_string());
    }
    t.message = t.state == "WAITING" ? "never started: the search was stopped" : "the search was stopped";
    t.state = "CANCELLED";
    t.finished_ms = gcs::now_ms();
    *changed = true;
  }
}

void SearchSupervisor::finish(gcs::SearchRecord& s) {
  s.finished_ms = gcs::now_ms();
  const int spent = gcs::trial_epochs(s);
  const int budget = static_cast<int>(s.trials.size()) * s.epochs;
  const std::string cost = std::to_string(spent) + " trial-epochs of " + std::to_string(budget);
  if (s.stop_requested) {
    s.state = "CANCELLED";
    s.message = "stopped by the user after " + cost;
    search_event(store_, s, "search_cancelled", "search " + s.id.short_hex() + " " + s.message);
    return;
  }
  int best = -1;
  double best_value = 0;
  const auto succeeded = std::count_if(s.trials.begin(), s.trials.end(),
                                       [](const gcs::TrialRecord& t) { return t.state == "SUCCEEDED"; });
  if (!gcs::best_trial(s, [](const gcs::TrialRecord& t) { return t.state == "SUCCEEDED"; }, &best_value, &best)) {
    s.state = "FAILED";
    s.message = succeeded == 0 ? "no trial succeeded (" + cost + "); troupe tune show " + s.id.short_hex() +
                                     " lists why each ended"
                               : std::to_string(succeeded) + " trials succeeded but none reported " + s.metric;
    search_event(store_, s, "search_failed", "search " + s.id.short_hex() + " failed: " + s.message);
    return;
  }
  s.best = best;
  s.best_value = best_value;
  s.state = "SUCCEEDED";
  const gcs::TrialRecord& b = s.trials[static_cast<size_t>(best)];
  s.message = "best: trial " + std::to_string(best) + " (" + gcs::describe_settings(b) + ") " + s.metric + " " +
              fmt(best_value) + "; " + cost;
  if (!s.save.empty()) {
    std::error_code ec;
    std::filesystem::copy_file(b.model_path, s.save, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) {
      s.message += "; its model was NOT copied to " + s.save + " (" + ec.message() + "): it is at " + b.model_path +
                   " on the node that ran the trial's rank 0";
    } else {
      s.message += "; its model saved to " + s.save;
    }
  }
  search_event(store_, s, "search_succeeded", "search " + s.id.short_hex() + " " + s.message);
}

}  // namespace troupe::actors
