// /api/jobs, /api/jobs/<id>, /api/events, /api/metrics: jobs with their live progress, and the
// newest entries of the events and metrics streams (gcs/events.h), filtered and bounded.
#include <algorithm>
#include <cstdint>

#include "dashboard/api_handlers.h"
#include "dashboard/api_paging.h"
#include "gcs/cluster_view.h"
#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::dashboard::detail {
namespace {

using nlohmann::json;

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

json metric_json(const gcs::Metric& m) { return {{"time_ms", m.time_ms}, {"name", m.name}, {"value", m.value}}; }

// The newest `limit` metrics whose name starts with `prefix`, oldest first. The stream holds about
// gcs::kEventStreamLength samples, so a filtered read scans at most that many.
Expected<json> newest_metrics(gcs::Store& store, const std::string& prefix, int64_t limit) {
  const size_t scan = prefix.empty() ? static_cast<size_t>(limit) : gcs::kEventStreamLength;
  auto metrics = gcs::recent_metrics(store, scan);
  if (!metrics.ok()) return metrics.status();
  std::vector<const gcs::Metric*> picked;
  for (auto it = metrics->rbegin(); it != metrics->rend() && static_cast<int64_t>(picked.size()) < limit; ++it) {
    if (starts_with(it->name, prefix)) picked.push_back(&*it);
  }
  json out = json::array();
  for (auto it = picked.rbegin(); it != picked.rend(); ++it) out.push_back(metric_json(**it));
  return out;
}

}  // namespace

ApiResponse get_jobs(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"state", "limit", "offset", "after"})) return param_error(*e);
  std::string state;
  PageRequest page;
  if (auto e = q.one_of("state", {"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}, &state)) {
    return param_error(*e);
  }
  if (auto e = read_page(q, 1, "-<submitted_ms>.<job id>", &page)) return param_error(*e);
  auto jobs = gcs::Table<gcs::JobRecord>(store).list();
  if (!jobs.ok()) return status_response(jobs.status());
  ApiResponse r;
  // Newest first: the job people look for is usually the one they just submitted.
  page_of(
      r.body, "jobs", *jobs, [](const gcs::JobRecord& j) { return Position{{-j.submitted_ms}, j.id.hex()}; },
      [&](const gcs::JobRecord& j) { return state.empty() || state == gcs::job_state_name(j.state); }, gcs::job_json,
      page);
  return r;
}

ApiResponse get_job(gcs::Store& store, const QueryParams& q, const std::string& id) {
  if (auto e = q.check_known({"metrics"})) return param_error(*e);
  int64_t metrics = 0;
  if (auto e = q.integer("metrics", 0, kMaxLimit, 1000, &metrics)) return param_error(*e);
  if (auto e = check_id("job", id)) return param_error(*e);
  auto job = gcs::Table<gcs::JobRecord>(store).get(id);
  if (!job.ok()) {
    if (job.status().code() == Code::not_found) return error_response(404, "no job " + id);
    return status_response(job.status());
  }
  auto actors = gcs::Table<gcs::ActorRecord>(store).list();
  if (!actors.ok()) return status_response(actors.status());
  std::sort(actors->begin(), actors->end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  ApiResponse r;
  r.body["job"] = gcs::job_json(*job);
  r.body["actors"] = json::array();
  for (const gcs::ActorRecord& a : *actors) {
    if (a.job == job->id && r.body["actors"].size() < static_cast<size_t>(kMaxLimit)) {
      r.body["actors"].push_back(gcs::actor_json(a));
    }
  }
  json samples = json::array();
  if (metrics > 0) {
    auto m = newest_metrics(store, "job/" + id + "/", metrics);
    if (!m.ok()) return status_response(m.status());
    samples = std::move(*m);
  }
  r.body["metrics"] = std::move(samples);
  auto group = job_group_json(store, id);
  if (!group.ok()) return status_response(group.status());
  r.body["collective_group"] = std::move(*group);
  return r;
}

ApiResponse get_events(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"kind", "subject", "since", "limit"})) return param_error(*e);
  std::string kind, subject;
  int64_t limit = 0, since = 0;
  if (auto e = q.text("kind", 64, &kind)) return param_error(*e);
  // A hex prefix of a node, actor or job id, or "job-<hex prefix>": a job's collective group.
  std::string group_prefix;
  if (auto e = q.text("subject", 64, &subject)) return param_error(*e);
  if (subject.rfind("job-", 0) == 0) {
    group_prefix = "job-";
    const QueryParams rest({{"subject", subject.substr(4)}});
    if (auto e = rest.hex_prefix("subject", &subject)) return param_error(*e);
  } else if (auto e = q.hex_prefix("subject", &subject)) {
    return param_error(*e);
  }
  subject = group_prefix + subject;
  if (auto e = q.integer("since", 0, INT64_MAX / 2, 0, &since)) return param_error(*e);
  if (auto e = q.integer("limit", 1, kMaxLimit, kDefaultEventLimit, &limit)) return param_error(*e);
  const bool filtered = !kind.empty() || !subject.empty() || since > 0;
  auto events = gcs::recent_events(store, filtered ? gcs::kEventStreamLength : static_cast<size_t>(limit));
  if (!events.ok()) return status_response(events.status());
  std::vector<const gcs::Event*> picked;
  for (auto it = events->rbegin(); it != events->rend() && static_cast<int64_t>(picked.size()) < limit; ++it) {
    if (it->time_ms < since) continue;
    if ((kind.empty() || it->kind == kind) && starts_with(it->subject, subject)) picked.push_back(&*it);
  }
  ApiResponse r;
  r.body["events"] = json::array();
  for (auto it = picked.rbegin(); it != picked.rend(); ++it) r.body["events"].push_back(gcs::event_json(**it));
  r.body["returned"] = picked.size();
  return r;
}

ApiResponse get_metrics(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"prefix", "limit"})) return param_error(*e);
  std::string prefix;
  int64_t limit = 0;
  if (auto e = q.text("prefix", 256, &prefix)) return param_error(*e);
  if (auto e = q.integer("limit", 1, kMaxLimit, kDefaultLimit, &limit)) return param_error(*e);
  auto m = newest_metrics(store, prefix, limit);
  if (!m.ok()) return status_response(m.status());
  ApiResponse r;
  r.body["returned"] = m->size();
  r.body["metrics"] = std::move(*m);
  return r;
}

}  // namespace troupe::dashboard::detail
