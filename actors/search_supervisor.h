// The head's search supervisor: it runs the hyperparameter searches of `troupe tune` (records in
// gcs/search_record.h). Every tick (twice a second) it reads each RUNNING search from the GCS and
// moves it on: it follows each trial's job (its state and its epochs, gcs/job_epochs.h), stops a
// trial that falls out of ASHA's top 1/eta at a rung (the job CANCELLED with "stopped early at rung
// R (epoch E): ..."), submits WAITING trials while fewer than max_concurrent run (the job
// supervisor keeps a trial that does not fit PENDING, like any job), and once every trial ended
// names the best (its metric at its last epoch, among the SUCCEEDED) and copies its model to the
// search's --save path. `troupe tune stop` (stop_requested) cancels what still runs.
//
// It keeps nothing the GCS does not: a restarted head goes on with every search where the last one
// left it (trials done stay done, running ones — their jobs adopted by the job supervisor — are
// followed, waiting ones submitted). Trial jobs have ids chosen when the search was made, so
// submitting one again after a crash finds the job it already started. Each change is written with
// compare-and-set (a `troupe tune stop` in between is kept; a search `troupe down` paused in between is
// left as it is) and mirrored to <dir>/search.json. A paused search is not moved at all.
// Trials restart under their own jobs' restart policies: a search does not restart trials.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/search_record.h"
#include "gcs/store.h"

namespace troupe::actors {

// What the search supervisor needs of the head (the job supervisor behind it); fakes in tests.
struct TrialHost {
  // Submits the trial's job (its JobRecord written PENDING first, when absent).
  std::function<Status(const gcs::SearchRecord& search, const gcs::TrialRecord& trial)> start;
  // Cancels the job with `reason` as its message.
  std::function<Status(const JobId& job, const std::string& reason)> stop;
  // Whether the head supervises the job now (false after a crash between its record and its submission).
  std::function<bool(const JobId& job)> supervises;
};

class SearchSupervisor {
 public:
  SearchSupervisor(gcs::Store& store, TrialHost host) : store_(store), host_(std::move(host)) {}
  // Moves every RUNNING search on; true when some search runs (the head keeps ticking).
  bool tick();
  // The GCS lost its data: the searches known here are written back (their trials' jobs are the
  // job supervisor's business: restarted from checkpoints, or failed with the reason).
  void on_gcs_lost();

  // One search's step (exposed for tests): returns whether `s` changed.
  bool advance(gcs::SearchRecord& s);

 private:
  void follow_trial(gcs::SearchRecord& s, gcs::TrialRecord& t, bool* changed);
  void apply_asha(gcs::SearchRecord& s, bool* changed);
  void start_waiting(gcs::SearchRecord& s, bool* changed);
  void stop_all(gcs::SearchRecord& s, bool* changed);
  void finish(gcs::SearchRecord& s);
  void mirror(const gcs::SearchRecord& s);

  gcs::Store& store_;
  TrialHost host_;
  std::map<SearchId, gcs::SearchRecord> known_;  // as last written (for on_gcs_lost)
};

class JobSupervisor;
// The head's TrialHost (actors/search_trials.cc): a trial's JobRecord written PENDING (when absent)
// and its submission handed to `jobs`, then `after_submit` (the head schedules placement retries);
// stop through `jobs`.
TrialHost trial_host(gcs::Store& store, JobSupervisor& jobs, std::function<void()> after_submit);

}  // namespace troupe::actors
