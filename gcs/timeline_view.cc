#include "gcs/timeline_view.h"

#include <algorithm>
#include <cstdio>

#include "gcs/events.h"

namespace troupe::gcs {
namespace {

using nlohmann::json;

constexpr size_t kWindow = 50;  // newest steps the straggler test compares

int64_t own_us(const StepSample& s) { return s.data_us + s.compute_us + s.optimizer_us; }

// Parameter-server jobs record a step's pull as `communication` and its push as `optimizer`
// (trainers/ps/async_worker.h, PsWorker::steps).
bool ps_job(const JobRecord& job) { return job.strategy == "async" || job.strategy == "central"; }

std::string ms_text(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, ms >= 100 ? "%.0f ms" : "%.1f ms", ms);
  return b;
}
std::string s_text(int64_t ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", ms / 1000.0);
  return b;
}

json step_json(const StepSample& s) {
  return {{"epoch", s.epoch}, {"step", s.step}, {"start_us", s.start_us}, {"data_us", s.data_us},
          {"compute_us", s.compute_us}, {"comm_us", s.comm_us}, {"optimizer_us", s.optimizer_us},
          {"comm_busy_us", s.comm_busy_us}, {"comm_bytes", s.comm_bytes}, {"samples", s.samples}, {"loss", s.loss}};
}

// Means over the newest `window` steps (all when 0).
json summary_json(const std::vector<StepSample>& steps, size_t window) {
  const size_t n = window == 0 ? steps.size() : std::min(window, steps.size());
  double data = 0, compute = 0, comm = 0, opt = 0, busy = 0, samples = 0;
  for (size_t i = steps.size() - n; i < steps.size(); ++i) {
    const StepSample& s = steps[i];
    data += s.data_us, compute += s.compute_us, comm += s.comm_us, opt += s.optimizer_us, busy += s.comm_busy_us;
    samples += static_cast<double>(s.samples);
  }
  json j = {{"steps", n}};
  if (n == 0) return j;
  const double d = 1000.0 * static_cast<double>(n);
  j["mean_data_ms"] = data / d;
  j["mean_compute_ms"] = compute / d;
  j["mean_comm_ms"] = comm / d;
  j["mean_optimizer_ms"] = opt / d;
  j["mean_comm_busy_ms"] = busy / d;
  j["mean_own_ms"] = (data + compute + opt) / d;
  j["mean_step_ms"] = (data + compute + comm + opt) / d;
  const double wall_us = static_cast<double>(steps.back().end_us() - steps[steps.size() - n].start_us);
  j["samples_per_second"] = wall_us > 0 ? samples * 1e6 / wall_us : 0.0;
  return j;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

json straggler_json(const JobRecord& job, const std::vector<WorkerTimeline>& workers, const TimelineOptions& o) {
  std::vector<double> own;  // mean own work per worker over the window, ms
  std::vector<int> ranks;
  for (const WorkerTimeline& w : workers) {
    if (w.steps.empty()) continue;
    const size_t n = std::min(kWindow, w.steps.size());
    double sum = 0;
    for (size_t i = w.steps.size() - n; i < w.steps.size(); ++i) sum += static_cast<double>(own_us(w.steps[i]));
    own.push_back(sum / 1000.0 / static_cast<double>(n));
    ranks.push_back(w.rank);
  }
  if (own.size() < 2) return nullptr;
  const size_t slow = static_cast<size_t>(std::max_element(own.begin(), own.end()) - own.begin());
  std::vector<double> others;
  for (size_t i = 0; i < own.size(); ++i)
    if (i != slow) others.push_back(own[i]);
  const double typical = median(others);
  if (own[slow] < o.straggler_factor * typical || own[slow] - typical < o.min_straggler_ms) return nullptr;
  const double ratio = typical > 0 ? own[slow] / typical : 0;
  char r[32];
  std::snprintf(r, sizeof r, "%.1fx", ratio);
  return {{"rank", ranks[slow]}, {"own_ms", own[slow]}, {"others_ms", typical}, {"ratio", ratio},
          {"message", "worker " + std::to_string(ranks[slow]) + " is the straggler: its steps take " +
                          ms_text(own[slow]) + " of data wait, forward/backward and " +
                          (ps_job(job) ? "push" : "optimizer") + " against " + ms_text(typical) + " for the others (" +
                          r + "); " +
                          (ps_job(job) ? "the others wait for it in their pulls (central, or async at the staleness "
                                         "bound) or train on older parameters"
                                       : "the others wait for it in the all-reduce")}};
}

json stuck_json(const JobRecord& job, const std::vector<WorkerTimeline>& workers, const TimelineOptions& o,
                int64_t now) {
  if (job.state != JobState::running) return nullptr;
  std::vector<int> waiting;
  int64_t waited = 0;
  for (const WorkerTimeline& w : workers) {
    if (w.live && w.live->phase == "communication" && now - w.live->phase_since_ms >= o.stuck_after_ms &&
        now - w.live->updated_ms < o.stale_after_ms) {
      waiting.push_back(w.rank);
      waited = std::max(waited, now - w.live->phase_since_ms);
    }
  }
  if (waiting.empty()) return nullptr;
  // The rank they wait for: one that stopped reporting first, else the one longest outside the
  // all-reduce.
  int culprit = -1, rank_score = -1;
  int64_t best = -1;
  std::string why;
  for (const WorkerTimeline& w : workers) {
    if (std::find(waiting.begin(), waiting.end(), w.rank) != waiting.end()) continue;
    // A parameter-server job's finished worker is waited for by nobody (its clock no longer counts).
    if (ps_job(job) && w.live && w.live->phase == "done") continue;
    int score = 0;
    int64_t age = 0;
    std::string reason;
    if (!w.live) {
      score = 2, age = INT64_MAX, reason = "it has not reported a phase";
    } else if (now - w.live->updated_ms >= o.stale_after_ms) {
      score = 2, age = now - w.live->updated_ms;
      reason = "no report from it for " + s_text(age) + ": its process is dead or stopped";
    } else if (w.live->phase != "communication") {
      score = 1, age = now - w.live->phase_since_ms;
      reason = "it is in " + w.live->phase + " for " + s_text(age);
    } else {
      continue;  // in the all-reduce, but not for long
    }
    if (score > rank_score || (score == rank_score && age > best)) culprit = w.rank, rank_score = score, best = age, why = reason;
  }
  std::string who;
  for (int r : waiting) who += (who.empty() ? "" : ", ") + std::to_string(r);
  json j = {{"waiting_ranks", waiting}, {"waiting_ms", waited}};
  const std::string head = (waiting.size() == 1 ? "rank " : "ranks ") + who + " wait" + (waiting.size() == 1 ? "s" : "") +
                           (ps_job(job) ? " in a pull from the parameter servers for " : " in the all-reduce for ") +
                           s_text(waited);
  if (culprit >= 0) {
    j["rank"] = culprit;
    j["message"] = head + " for rank " + std::to_string(culprit) + " (" + why + ")";
  } else {
    j["rank"] = nullptr;
    j["message"] = head + (ps_job(job) ? "; every worker is in one (a parameter server, or the network)"
                                       : "; every rank is in it (the network, or a collective's peer outside the job)");
  }
  return j;
}

// The phases of this job's steps in the order they run, with their labels.
json phases_json(const JobRecord& job) {
  auto phase = [](const char* key, const char* name) { return json{{"key", key}, {"name", name}}; };
  if (ps_job(job)) {
    return json::array({phase("data_us", "data wait"), phase("comm_us", "pull"), phase("compute_us", "forward/backward"),
                        phase("optimizer_us", "push")});
  }
  return json::array({phase("data_us", "data wait"), phase("compute_us", "forward/backward"),
                      phase("comm_us", "communication"), phase("optimizer_us", "optimizer")});
}

}  // namespace

Expected<std::vector<WorkerTimeline>> read_job_timeline(Store& store, const JobRecord& job, size_t steps) {
  std::vector<WorkerTimeline> out;
  const std::string hex = job.id.hex();
  for (int r = 0; r < std::max(job.workers, 0) && r < 4096; ++r) {
    WorkerTimeline w;
    w.rank = r;
    auto s = read_steps(store, hex, r, steps);
    if (!s.ok()) return s.status();
    w.steps = std::move(*s);
    auto live = read_live(store, hex, r);
    if (!live.ok()) return live.status();
    w.live = *live;
    out.push_back(std::move(w));
  }
  return out;
}

json timeline_json(const JobRecord& job, const std::vector<WorkerTimeline>& workers, const TimelineOptions& o,
                   const std::vector<LossPoint>& loss_curve) {
  const int64_t now = o.now_ms ? o.now_ms : now_ms();
  json ws = json::array();
  for (const WorkerTimeline& w : workers) {
    json steps = json::array();
    for (const StepSample& s : w.steps) steps.push_back(step_json(s));
    json live = nullptr;
    if (w.live) {
      live = {{"phase", w.live->phase}, {"phase_since_ms", w.live->phase_since_ms}, {"epoch", w.live->epoch},
              {"step", w.live->step}, {"updated_ms", w.live->updated_ms}, {"age_ms", now - w.live->updated_ms}};
    }
    ws.push_back({{"rank", w.rank}, {"live", live}, {"summary", summary_json(w.steps, 0)}, {"steps", std::move(steps)}});
  }
  json curve = json::array();
  for (const LossPoint& p : loss_curve) curve.push_back({p.step, p.loss});
  return {{"job", job.id.hex()}, {"state", job_state_name(job.state)}, {"strategy", job.strategy},
          {"workers", std::move(ws)}, {"straggler", straggler_json(job, workers, o)}, {"stuck", stuck_json(job, workers, o, now)},
          {"phases", phases_json(job)}, {"loss_curve", std::move(curve)}, {"now_ms", now}};
}

namespace {

// The "job" track's slices of its last restart (chrome_trace): nothing until it resumed.
void add_recovery(const JobRecovery& r, json* events) {
  if (r.restarts <= 0 || r.failed_ms <= 0 || r.resumed_ms < r.failed_ms) return;
  events->push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", -1}, {"args", {{"name", "job"}}}});
  const json args = {{"restarts", r.restarts},        {"cause", r.cause},         {"failed_step", r.failed_step},
                     {"from_step", r.from_step},      {"steps_lost", r.steps_lost()},
                     {"source_rank", r.source_rank},  {"bytes_moved", r.bytes_moved}};
  const std::string mode = r.mode.empty() ? "restart" : r.mode;
  events->push_back({{"name", "recovery (" + mode + ")"}, {"cat", "recovery"}, {"ph", "X"}, {"pid", 1}, {"tid", -1},
                     {"ts", r.failed_ms * 1000}, {"dur", (r.resumed_ms - r.failed_ms) * 1000}, {"args", args}});
  if (r.detected_ms >= r.failed_ms)
    events->push_back({{"name", "detecting"}, {"cat", "recovery"}, {"ph", "X"}, {"pid", 1}, {"tid", -1},
                       {"ts", r.failed_ms * 1000}, {"dur", (r.detected_ms - r.failed_ms) * 1000}});
}

}  // namespace

json chrome_trace(const JobRecord& job, const std::vector<WorkerTimeline>& workers,
                  const std::optional<JobRecovery>& recovery) {
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0},
                    {"args", {{"name", "job " + job.id.hex() + " (" + job.strategy + ")"}}}});
  if (recovery) add_recovery(*recovery, &events);
  for (const WorkerTimeline& w : workers) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", w.rank},
                      {"args", {{"name", "worker " + std::to_string(w.rank)}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 1}, {"tid", w.rank},
                      {"args", {{"sort_index", w.rank}}}});
    for (const StepSample& s : w.steps) {
      const json args = {{"epoch", s.epoch}, {"step", s.step}, {"samples", s.samples}, {"loss", s.loss},
                         {"comm_busy_us", s.comm_busy_us}, {"comm_bytes", s.comm_bytes}};
      events.push_back({{"name", "step " + std::to_string(s.step)}, {"cat", "step"}, {"ph", "X"}, {"pid", 1},
                        {"tid", w.rank}, {"ts", s.start_us}, {"dur", s.end_us() - s.start_us}, {"args", args}});
      int64_t t = s.start_us;
      using Phase = std::pair<const char*, int64_t>;
      const std::vector<Phase> phases =  // in the order the step ran them
          ps_job(job) ? std::vector<Phase>{{"data_wait", s.data_us}, {"pull", s.comm_us},
                                           {"forward_backward", s.compute_us}, {"push", s.optimizer_us}}
                      : std::vector<Phase>{{"data_wait", s.data_us}, {"forward_backward", s.compute_us},
                                           {"communication", s.comm_us}, {"optimizer", s.optimizer_us}};
      for (const auto& [name, dur] : phases) {
        if (dur > 0) {
          events.push_back({{"name", name}, {"cat", "phase"}, {"ph", "X"}, {"pid", 1}, {"tid", w.rank}, {"ts", t},
                            {"dur", dur}});
        }
        t += dur;
      }
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
          {"otherData", {{"job", job.id.hex()}, {"strategy", job.strategy}, {"workers", job.workers},
                         {"state", job_state_name(job.state)}}}};
}

}  // namespace troupe::gcs
