// The handlers behind handle_api (api.h), one per endpoint; internal to the dashboard library.
// Each checks its parameters first (400 naming the first bad one), then reads the GCS.
#pragma once

#include <string>

#include "dashboard/api.h"
#include "dashboard/api_params.h"
#include "gcs/cluster_view.h"

namespace troupe::dashboard::detail {

// 400 {"error": message, "parameter": name}.
ApiResponse param_error(const ParamError& e);
// An id in a path: exactly 32 lower-case hex digits, else an error (parameter "id") naming `kind`.
std::optional<ParamError> check_id(const std::string& kind, const std::string& id);

// api_cluster.cc
// The parameters of /api/cluster and /api/stream (and no others): `events` (0 - kMaxViewEvents,
// default 10) and `actors` (actor entries, 0 - kMaxViewActors, default all: the summary counts all).
std::optional<ParamError> read_view_options(const QueryParams& q, gcs::ViewOptions* out);
ApiResponse get_cluster(gcs::Store& store, const QueryParams& q);
ApiResponse get_nodes(gcs::Store& store, const QueryParams& q);
ApiResponse get_node(gcs::Store& store, const QueryParams& q, const std::string& id);
ApiResponse get_actors(gcs::Store& store, const QueryParams& q);

// api_jobs.cc
ApiResponse get_jobs(gcs::Store& store, const QueryParams& q);
ApiResponse get_job(gcs::Store& store, const QueryParams& q, const std::string& id);
ApiResponse get_events(gcs::Store& store, const QueryParams& q);
ApiResponse get_metrics(gcs::Store& store, const QueryParams& q);

// api_timeline.cc
ApiResponse get_job_timeline(gcs::Store& store, const QueryParams& q, const std::string& id);
// The job's collective group ("job-<id>") and its group_failed events, for /api/jobs/<id>.
Expected<nlohmann::json> job_group_json(gcs::Store& store, const std::string& job_hex);

// api_searches.cc: `troupe tune` searches; <id> may be a unique prefix of 4 or more hex digits.
ApiResponse get_searches(gcs::Store& store, const QueryParams& q);
ApiResponse get_search(gcs::Store& store, const QueryParams& q, const std::string& id);

// api_logs.cc
ApiResponse get_logs(gcs::Store& store, const QueryParams& q, const ApiContext& context);

}  // namespace troupe::dashboard::detail
