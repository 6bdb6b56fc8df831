// A hyperparameter search (`troupe tune`) in the GCS: table "searches", key the search id, value
// JSON. The CLI writes it first (RUNNING, every trial WAITING with its settings and the job it will
// submit); from then on the head's search supervisor (actors/search_supervisor.h) moves it, and
// `troupe tune stop` sets stop_requested. Every write after the first is a compare-and-set of the
// whole record (update_search), so the writers never undo each other. The supervisor also mirrors
// it to <dir>/search.json, which `troupe tune --resume` reads after a whole-cluster restart.
//
// Trials: WAITING (not submitted yet) --> the state of its job (PENDING, RUNNING, SUCCEEDED,
// FAILED, CANCELLED; a trial stopped early is CANCELLED with "stopped early at rung R ...").
// Search: RUNNING --> SUCCEEDED (every trial ended, at least one succeeded: the best is named)
//                 --> FAILED (every trial ended, none succeeded) | CANCELLED (troupe tune stop)
// `troupe down` pauses a RUNNING search (`paused`, written before it cancels the trials' jobs, so the
// trials it cuts short stay RUNNING in the record and its search.json); `troupe tune --resume` on a
// new cluster clears it and runs them again.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/job_epochs.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr const char* kSearchTable = "searches";

struct TrialRecord {
  int index = 0;
  std::vector<std::pair<std::string, std::string>> settings;  // searched flag -> value, in --search order
  JobId job;                   // the job it runs as (chosen when the search is made)
  std::string state = "WAITING";  // WAITING or a job state name
  std::string message;         // the job's last message, or why it was stopped
  std::vector<EpochResult> epochs;  // copied from the job's history (gcs/job_epochs.h)
  std::vector<int> rungs_passed;    // rung epochs at which it was kept
  int stopped_at = 0;          // the rung epoch at which it was stopped early (0: not stopped)
  int64_t started_ms = 0;      // submitted
  int64_t finished_ms = 0;
  std::string submission;      // the SubmitJob to send, JSON (actors/job_submissions.h)
  std::vector<std::string> spec;  // the job's settings (trainers/job/job_spec.h), for its JobRecord
  std::string strategy;
  int workers = 0;
  int ps = 0;
  std::string model_path;      // where it saves its model (the search has --save), else empty
};

struct SearchRecord {
  SearchId id;
  std::string name;
  std::string state = "RUNNING";  // RUNNING, SUCCEEDED, FAILED, CANCELLED
  std::string message;
  std::vector<std::string> space;  // the --search arguments as given
  std::string metric = "test_accuracy";
  std::string mode = "max";    // max or min
  std::string scheduler = "fifo";  // fifo or asha
  int grace = 1;               // asha: the first rung's epoch
  int eta = 3;                 // asha: 1/eta of the trials at a rung go on
  int epochs = 0;              // each trial's epochs
  int max_concurrent = 0;      // trials submitted at once (0: all; the cluster's room decides)
  uint64_t seed = 0;
  std::string dir;             // the search's directory (search.json, trial models, checkpoints)
  std::string save;            // where the best trial's model is copied (empty: not kept)
  bool stop_requested = false;
  bool paused = false;         // `troupe down` ran with it RUNNING: nobody moves it until `tune --resume`
  int best = -1;               // index of the best trial once the search ended
  double best_value = 0;
  int64_t created_ms = 0;
  int64_t finished_ms = 0;
  int64_t updated_ms = 0;
  std::vector<TrialRecord> trials;
};

bool search_finished(const std::string& state);  // SUCCEEDED, FAILED or CANCELLED
bool trial_finished(const std::string& state);   // SUCCEEDED, FAILED or CANCELLED
// The trial's value of the search's metric at `epoch` (its last epoch when epoch <= 0); a value that
// is not finite comes back as the worst for the search's mode (-inf for max, +inf for min).
bool trial_metric(const SearchRecord& s, const TrialRecord& t, int epoch, double* value);
// Epochs trained by all trials together (what the search cost).
int trial_epochs(const SearchRecord& s);

// JSON; decode: corrupt_data naming what does not decode. With record_key and TableName, gcs::Table
// serves the table (gcs/tables.h): put, get, list and update_record as for every GCS record.
std::string encode(const SearchRecord& s);
Status decode(const std::string& bytes, SearchRecord* out);
std::string record_key(const SearchRecord& s);  // the search id's hex
template <> struct TableName<SearchRecord> { static constexpr const char* value = kSearchTable; };

Status put_search(Store& store, const SearchRecord& s);
Expected<SearchRecord> get_search(Store& store, const SearchId& id);
Expected<std::vector<SearchRecord>> list_searches(Store& store);
// update_record of the search (gcs/tables.h): re-reads and re-applies `edit` until its write wins (or
// `timeout`). An edit's error is returned as is, the record unchanged.
Expected<SearchRecord> update_search(Store& store, const SearchId& id, const std::function<Status(SearchRecord&)>& edit,
                                     std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
// The search whose id is `text` or starts with it (at least 4 hex digits), naming the ambiguity.
Expected<SearchId> find_search(Store& store, const std::string& text);

// What users see of a search (`troupe tune show --json`, the dashboard's /api/searches/<id>): the
// record without the trials' submissions and job settings; per trial its settings as an object, its
// metric by epoch ("values": [[epoch, value], ...]), wall seconds; and trial_epochs / trial_epochs_budget.
nlohmann::json search_summary_json(const SearchRecord& s);

// The best finite value of the search's metric at the last epoch of the trials `counts` accepts
// (all when empty), and that trial; false when none has one. The one rule for "best": the search's
// result (SUCCEEDED trials) and the best so far shown while it runs.
bool best_trial(const SearchRecord& s, const std::function<bool(const TrialRecord&)>& counts, double* value,
                int* trial);
// The best value of the search's metric among the trials' last epochs and its trial: the search's
// own choice once it ended with one (best >= 0; *final = true), else best_trial over every trial.
// false before any trial reported the metric.
bool best_so_far(const SearchRecord& s, double* value, int* trial, bool* final = nullptr);
// A search in one line of JSON (the dashboard's /api/searches rows, `troupe status --json`): id,
// name, state, message, scheduler, metric, mode, epochs, trial_count, trials_by_state,
// stopped_early, best_so_far ({trial, value, final} or null), created/finished/updated_ms.
nlohmann::json search_brief_json(const SearchRecord& s);

// Writes `s` to <s.dir>/search.json (temp file + rename); an error names the path.
Status write_search_file(const SearchRecord& s);
// Reads a search.json (a directory holding one, or the file itself).
Expected<SearchRecord> read_search_file(const std::string& path);
// "lr=0.0031 batch-size=128"
std::string describe_settings(const TrialRecord& t);

}  // namespace troupe::gcs
