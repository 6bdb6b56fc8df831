// /api/jobs/<id>/timeline: the job's step timelines (gcs/timeline_view.h) as JSON or as a Chrome
// trace; and the job's collective group for /api/jobs/<id>.
#include <algorithm>

#include "dashboard/api_handlers.h"
#include "gcs/cluster_view.h"
#include "gcs/events.h"
#include "gcs/tables.h"
#include "gcs/timeline_view.h"

namespace troupe::dashboard::detail {

using nlohmann::json;

// The most steps one timeline answer holds, over all workers (~200 bytes each as JSON).
constexpr int64_t kMaxTimelineSteps = 100000;

ApiResponse get_job_timeline(gcs::Store& store, const QueryParams& q, const std::string& id) {
  if (auto e = q.check_known({"steps", "format"})) return param_error(*e);
  int64_t steps = 0;
  std::string format;
  if (auto e = q.integer("steps", 1, static_cast<int64_t>(gcs::kTimelineMaxSteps), 500, &steps)) return param_error(*e);
  if (auto e = q.one_of("format", {"json", "chrome"}, &format)) return param_error(*e);
  if (auto e = check_id("job", id)) return param_error(*e);
  auto job = gcs::Table<gcs::JobRecord>(store).get(id);
  if (!job.ok()) {
    if (job.status().code() == Code::not_found) return error_response(404, "no job " + id);
    return status_response(job.status());
  }
  // The answer is bounded in all: at most kMaxTimelineSteps steps over every worker.
  const int64_t per_worker = std::max<int64_t>(1, std::min<int64_t>(steps, kMaxTimelineSteps / std::max(job->workers, 1)));
  auto workers = gcs::read_job_timeline(store, *job, static_cast<size_t>(per_worker));
  if (!workers.ok()) return status_response(workers.status());
  ApiResponse r;
  if (format == "chrome") {
    auto recovery = gcs::job_recovery(store, job->id);  // drawn when readable
    r.body = gcs::chrome_trace(*job, *workers, recovery.ok() ? *recovery : std::nullopt);
    return r;
  }
  auto curve = gcs::read_loss_curve(store, id, gcs::kLossCurvePoints);
  if (!curve.ok()) return status_response(curve.status());
  r.body = gcs::timeline_json(*job, *workers, gcs::TimelineOptions{}, *curve);
  r.body["steps_per_worker"] = per_worker;
  if (job->strategy == "pipeline") {
    r.body["note"] = "step timelines are recorded for sync, async and central jobs; this job is " + job->strategy;
  }
  return r;
}

Expected<json> job_group_json(gcs::Store& store, const std::string& job_hex) {
  const std::string name = "job-" + job_hex;
  json out = {{"name", name}, {"group", nullptr}, {"failures", json::array()}};
  auto group = gcs::Table<gcs::GroupRecord>(store).get(name);
  if (group.ok()) {
    json members = json::array();
    for (const gcs::GroupMember& m : group->members) {
      members.push_back({{"rank", m.rank}, {"node", m.node.hex()}, {"actor", m.actor.hex()}, {"address", m.address}});
    }
    out["group"] = {{"generation", group->generation}, {"world_size", group->world_size}, {"members", members}};
  } else if (group.status().code() != Code::not_found) {
    return group.status();
  }
  auto events = gcs::recent_events(store, gcs::kEventStreamLength);
  if (!events.ok()) return events.status();
  for (const gcs::Event& e : *events) {
    if (e.kind == "group_failed" && e.subject == name) out["failures"].push_back(gcs::event_json(e));
  }
  if (out["failures"].size() > 20) {  // the newest 20
    json& f = out["failures"];
    f.erase(f.begin(), f.end() - 20);
  }
  return out;
}

}  // namespace troupe::dashboard::detail
