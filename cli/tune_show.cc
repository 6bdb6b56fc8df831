#include "cli/tune_show.h"

#include <algorithm>

#include "gcs/events.h"

namespace troupe::cli {
namespace {

std::string fmt(double v, const char* f = "%.4f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

std::string search_line(const gcs::SearchRecord& s) {
  int waiting = 0, active = 0, done = 0, stopped = 0, failed = 0;
  for (const gcs::TrialRecord& t : s.trials) {
    if (t.state == "WAITING") ++waiting;
    else if (t.state == "PENDING" || t.state == "RUNNING") ++active;
    else if (t.stopped_at > 0) ++stopped;
    else if (t.state == "SUCCEEDED") ++done;
    else ++failed;
  }
  std::string line = s.id.short_hex() + "  " + s.name + "  " + (s.paused ? "PAUSED" : s.state) + "  " + s.scheduler + " " + s.metric + " " +
                     s.mode + "  " + std::to_string(s.trials.size()) + " trials: " + std::to_string(active) +
                     " running, " + std::to_string(waiting) + " waiting, " + std::to_string(done) + " done, " +
                     std::to_string(stopped) + " stopped early";
  if (failed) line += ", " + std::to_string(failed) + " failed or cancelled";
  double best = 0;
  int index = -1;
  if (gcs::best_so_far(s, &best, &index)) line += "  best " + fmt(best) + " (trial " + std::to_string(index) + ")";
  return line;
}

void print_search_table(std::FILE* out, const gcs::SearchRecord& s, size_t max_rows) {
  std::fprintf(out, "search %s (%s): %s, %s, %s %s over %d epochs per trial\n", s.id.short_hex().c_str(), s.name.c_str(),
               s.paused ? "PAUSED" : s.state.c_str(), s.scheduler == "asha" ? ("asha, eta " + std::to_string(s.eta)).c_str() : "fifo",
               s.metric.c_str(), s.mode.c_str(), s.epochs);
  if (!s.message.empty()) std::fprintf(out, "  %s\n", s.message.c_str());
  // Columns: trial, state, each searched setting, epochs, the metric at the last epoch, wall, note.
  std::vector<std::string> names;
  if (!s.trials.empty())
    for (const auto& kv : s.trials.front().settings) names.push_back(kv.first);
  std::vector<size_t> widths;
  for (const std::string& n : names) {
    size_t w = n.size();
    for (const gcs::TrialRecord& t : s.trials)
      for (const auto& kv : t.settings)
        if (kv.first == n) w = std::max(w, kv.second.size());
    widths.push_back(std::min<size_t>(w, 24));
  }
  std::fprintf(out, "  %-5s %-9s", "trial", "state");
  for (size_t i = 0; i < names.size(); ++i) std::fprintf(out, " %-*s", static_cast<int>(widths[i]), names[i].c_str());
  std::fprintf(out, " %6s %-13s %8s  %s\n", "epochs", s.metric.substr(0, 13).c_str(), "wall", "by epoch / note");
  const int64_t now = gcs::now_ms();
  size_t rows = 0;
  for (const gcs::TrialRecord& t : s.trials) {
    if (rows++ >= max_rows) {
      std::fprintf(out, "  ... %zu more trials (troupe tune show %s)\n", s.trials.size() - max_rows, s.id.short_hex().c_str());
      break;
    }
    std::fprintf(out, "  %-5d %-9s", t.index, t.state.c_str());
    for (size_t i = 0; i < names.size(); ++i) {
      std::string v = i < t.settings.size() ? t.settings[i].second : "";
      std::fprintf(out, " %-*s", static_cast<int>(widths[i]), v.substr(0, 24).c_str());
    }
    double last = 0;
    const bool has = gcs::trial_metric(s, t, 0, &last);
    const int epochs = t.epochs.empty() ? 0 : t.epochs.back().epoch;
    const double wall = t.started_ms ? static_cast<double>((t.finished_ms ? t.finished_ms : now) - t.started_ms) / 1000 : 0;
    std::string note;
    for (const gcs::EpochResult& e : t.epochs) {
      double v = 0;
      if (gcs::epoch_metric(e, s.metric, &v)) note += (note.empty() ? "" : " ") + fmt(v, "%.3f");
    }
    if (t.index == s.best) note = "BEST  " + note;
    if (t.stopped_at > 0 || (t.state != "SUCCEEDED" && t.state != "RUNNING" && !t.message.empty()))
      note += (note.empty() ? "" : "  ") + t.message;
    std::fprintf(out, " %6d %-13s %7.1fs  %s\n", epochs, has ? fmt(last).c_str() : "-", wall, note.c_str());
  }
  std::fprintf(out, "  trial-epochs: %d of %lld (%zu trials x %d epochs)\n", gcs::trial_epochs(s),
               static_cast<long long>(s.trials.size()) * s.epochs, s.trials.size(), s.epochs);
}

}  // namespace troupe::cli
