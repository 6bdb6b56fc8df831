#include "gcs/search_record.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::gcs {
namespace {

using Json = nlohmann::json;

Json trial_json(const TrialRecord& t) {
  Json settings = Json::array();
  for (const auto& [k, v] : t.settings) settings.push_back({k, v});
  Json epochs = Json::array();
  for (const EpochResult& e : t.epochs) epochs.push_back(epoch_result_json(e));
  return {{"index", t.index},         {"settings", settings},     {"job", t.job.hex()},
          {"state", t.state},         {"message", t.message},     {"epochs", epochs},
          {"rungs_passed", t.rungs_passed}, {"stopped_at", t.stopped_at}, {"started_ms", t.started_ms},
          {"finished_ms", t.finished_ms}, {"submission", t.submission}, {"spec", t.spec},
          {"strategy", t.strategy},   {"workers", t.workers},     {"ps", t.ps},
          {"model_path", t.model_path}};
}

TrialRecord trial_from(const Json& j) {
  TrialRecord t;
  t.index = j.at("index").get<int>();
  for (const Json& kv : j.at("settings")) t.settings.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
  auto job = JobId::from_hex(j.at("job").get<std::string>());
  if (!job.ok()) throw std::runtime_error(job.status().message());
  t.job = *job;
  t.state = j.at("state").get<std::string>();
  t.message = j.at("message").get<std::string>();
  for (const Json& e : j.at("epochs")) t.epochs.push_back(epoch_result_from_json(e));
  t.rungs_passed = j.at("rungs_passed").get<std::vector<int>>();
  t.stopped_at = j.at("stopped_at").get<int>();
  t.started_ms = j.at("started_ms").get<int64_t>();
  t.finished_ms = j.at("finished_ms").get<int64_t>();
  t.submission = j.at("submission").get<std::string>();
  t.spec = j.at("spec").get<std::vector<std::string>>();
  t.strategy = j.at("strategy").get<std::string>();
  t.workers = j.at("workers").get<int>();
  t.ps = j.at("ps").get<int>();
  t.model_path = j.at("model_path").get<std::string>();
  return t;
}

Json search_json(const SearchRecord& s) {
  Json trials = Json::array();
  for (const TrialRecord& t : s.trials) trials.push_back(trial_json(t));
  Json j = {{"id", s.id.hex()},       {"name", s.name},         {"state", s.state},
            {"message", s.message},   {"space", s.space},       {"metric", s.metric},
            {"mode", s.mode},         {"scheduler", s.scheduler}, {"grace", s.grace},
            {"eta", s.eta},           {"epochs", s.epochs},     {"max_concurrent", s.max_concurrent},
            {"seed", s.seed},         {"dir", s.dir},           {"save", s.save},
            {"stop_requested", s.stop_requested}, {"paused", s.paused}, {"best", s.best}, {"best_value", s.best_value},
            {"created_ms", s.created_ms}, {"finished_ms", s.finished_ms}, {"updated_ms", s.updated_ms},
            {"trials", trials}};
  return j;
}

}  // namespace

bool search_finished(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
}
bool trial_finished(const std::string& state) { return search_finished(state); }

bool trial_metric(const SearchRecord& s, const TrialRecord& t, int epoch, double* value) {
  if (t.epochs.empty()) return false;
  const EpochResult* at = epoch <= 0 ? &t.epochs.back() : nullptr;
  for (const EpochResult& e : t.epochs)
    if (e.epoch == epoch) at = &e;
  if (!at || !epoch_metric(*at, s.metric, value)) return false;
  *value = rank_value(*value, s.mode);
  return true;
}

int trial_epochs(const SearchRecord& s) {
  int n = 0;
  for (const TrialRecord& t : s.trials) n += t.epochs.empty() ? 0 : t.epochs.back().epoch;
  return n;
}

std::string encode(const SearchRecord& s) { return search_json(s).dump(); }

std::string record_key(const SearchRecord& s) { return s.id.hex(); }

Status decode(const std::string& bytes, SearchRecord* out) {
  try {
    const Json j = Json::parse(bytes);
    SearchRecord s;
    auto id = SearchId::from_hex(j.at("id").get<std::string>());
    if (!id.ok()) return corrupt_data("search record: " + id.status().message());
    s.id = *id;
    s.name = j.at("name").get<std::string>();
    s.state = j.at("state").get<std::string>();
    s.message = j.at("message").get<std::string>();
    s.space = j.at("space").get<std::vector<std::string>>();
    s.metric = j.at("metric").get<std::string>();
    s.mode = j.at("mode").get<std::string>();
    s.scheduler = j.at("scheduler").get<std::string>();
    s.grace = j.at("grace").get<int>();
    s.eta = j.at("eta").get<int>();
    s.epochs = j.at("epochs").get<int>();
    s.max_concurrent = j.at("max_concurrent").get<int>();
    s.seed = j.at("seed").get<uint64_t>();
    s.dir = j.at("dir").get<std::string>();
    s.save = j.at("save").get<std::string>();
    s.stop_requested = j.at("stop_requested").get<bool>();
    s.paused = j.value("paused", false);
    s.best = j.at("best").get<int>();
    s.best_value = j.at("best_value").is_null() ? 0.0 : j.at("best_value").get<double>();
    s.created_ms = j.at("created_ms").get<int64_t>();
    s.finished_ms = j.at("finished_ms").get<int64_t>();
    s.updated_ms = j.at("updated_ms").get<int64_t>();
    for (const Json& t : j.at("trials")) s.trials.push_back(trial_from(t));
    *out = std::move(s);
    return {};
  } catch (const std::exception& e) {
    return corrupt_data(std::string("search record does not decode: ") + e.what());
  }
}

Status put_search(Store& store, const SearchRecord& s) { return Table<SearchRecord>(store).put(s); }

Expected<SearchRecord> get_search(Store& store, const SearchId& id) {
  auto s = Table<SearchRecord>(store).get(id.hex());
  if (!s.ok() && s.status().code() == Code::not_found) return not_found("no search " + id.hex());  // as update_search says
  return s;
}

Expected<std::vector<SearchRecord>> list_searches(Store& store) { return Table<SearchRecord>(store).list(); }

Expected<SearchRecord> update_search(Store& store, const SearchId& id, const std::function<Status(SearchRecord&)>& edit,
                                     std::chrono::milliseconds timeout) {
  return update_record<SearchRecord>(store, id.hex(), "search", edit, timeout);
}

Expected<SearchId> find_search(Store& store, const std::string& text) {
  if (text.size() == 32) return SearchId::from_hex(text);
  if (text.size() < 4) return invalid_argument("search '" + text + "': give at least 4 hex digits of its id");
  auto all = store.get_all(kSearchTable);
  if (!all.ok()) return all.status();
  std::vector<std::string> hits;
  for (const auto& kv : *all)
    if (kv.first.compare(0, text.size(), text) == 0) hits.push_back(kv.first);
  if (hits.empty()) return not_found("no search with an id starting '" + text + "' (troupe tune list shows them)");
  if (hits.size() > 1) return invalid_argument("search '" + text + "' is ambiguous: " + std::to_string(hits.size()) +
                                               " searches start so; give more digits");
  return SearchId::from_hex(hits[0]);
}

Status write_search_file(const SearchRecord& s) {
  if (s.dir.empty()) return {};
  namespace fs = std::filesystem;
  const fs::path dir(s.dir), file = dir / "search.json", tmp = dir / ("search.json.tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return unavailable("creating the search directory " + dir.string() + ": " + ec.message());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << search_json(s).dump(1) << "\n";
    out.flush();
    if (!out) return unavailable("writing " + tmp.string() + ": the disk is full or not writable");
  }
  fs::rename(tmp, file, ec);
  if (ec) return unavailable("renaming " + tmp.string() + " to " + file.string() + ": " + ec.message());
  return {};
}

Expected<SearchRecord> read_search_file(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path file(path);
  if (fs::is_directory(file)) file /= "search.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) return not_found("no search file at " + file.string() + " (a search keeps one in its directory)");
  std::stringstream text;
  text << in.rdbuf();
  SearchRecord s;
  Status st = decode(text.str(), &s);
  if (!st.ok()) return st.with_context(file.string());
  return s;
}

nlohmann::json search_summary_json(const SearchRecord& s) {
  Json j = search_json(s);
  const int64_t now = now_ms();
  for (size_t i = 0; i < s.trials.size(); ++i) {
    const TrialRecord& t = s.trials[i];
    Json& tj = j["trials"][i];
    tj.erase("submission");
    tj.erase("spec");
    Json settings = Json::object();
    for (const auto& [k, v] : t.settings) settings[k] = v;
    tj["settings"] = settings;
    Json values = Json::array();
    for (const EpochResult& e : t.epochs) {
      double v = 0;
      if (epoch_metric(e, s.metric, &v)) values.push_back({e.epoch, v});
    }
    tj["values"] = values;
    const int64_t end = t.finished_ms ? t.finished_ms : now;
    tj["wall_seconds"] = t.started_ms ? static_cast<double>(end - t.started_ms) / 1000.0 : 0.0;
  }
  j["trial_epochs"] = trial_epochs(s);
  j["trial_epochs_budget"] = static_cast<int64_t>(s.trials.size()) * s.epochs;
  return j;
}

bool best_trial(const SearchRecord& s, const std::function<bool(const TrialRecord&)>& counts, double* value,
                int* trial) {
  bool any = false;
  for (const TrialRecord& t : s.trials) {
    if (counts && !counts(t)) continue;
    double v = 0;
    if (!trial_metric(s, t, 0, &v) || !std::isfinite(v)) continue;  // a diverged trial is never the best
    if (!any || (s.mode == "min" ? v < *value : v > *value)) {
      *value = v;
      *trial = t.index;
      any = true;
    }
  }
  return any;
}

bool best_so_far(const SearchRecord& s, double* value, int* trial, bool* final) {
  if (final) *final = s.best >= 0;
  if (s.best >= 0) {
    *value = s.best_value;
    *trial = s.best;
    return true;
  }
  return best_trial(s, nullptr, value, trial);
}

nlohmann::json search_brief_json(const SearchRecord& s) {
  std::map<std::string, int> by_state;
  int stopped = 0;
  for (const TrialRecord& t : s.trials) {
    ++by_state[t.state];
    if (t.stopped_at > 0) ++stopped;
  }
  double value = 0;
  int trial = -1;
  bool final = false;
  Json best = nullptr;
  if (best_so_far(s, &value, &trial, &final)) best = {{"trial", trial}, {"value", value}, {"final", final}};
  return {{"id", s.id.hex()},           {"name", s.name},
          {"state", s.state},           {"message", s.message},
          {"scheduler", s.scheduler},   {"metric", s.metric},
          {"mode", s.mode},             {"epochs", s.epochs},
          {"trial_count", s.trials.size()}, {"trials_by_state", by_state},
          {"stopped_early", stopped},   {"best_so_far", best},
          {"created_ms", s.created_ms}, {"finished_ms", s.finished_ms},
          {"updated_ms", s.updated_ms}};
}

std::string describe_settings(const TrialRecord& t) {
  std::string out;
  for (const auto& [k, v] : t.settings) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

}  // namespace troupe::gcs
