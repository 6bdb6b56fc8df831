// The router of the JSON API and its error answers.
#include "dashboard/api.h"

#include <algorithm>
#include <exception>

#include "dashboard/api_handlers.h"

namespace troupe::dashboard {
namespace detail {

ApiResponse param_error(const ParamError& e) {
  ApiResponse r = error_response(400, e.message);
  r.body["parameter"] = e.parameter;
  return r;
}

std::optional<ParamError> check_id(const std::string& kind, const std::string& id) {
  const bool ok = id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (ok) return std::nullopt;
  const std::string shown = id.size() > 40 ? id.substr(0, 40) + "..." : id;
  return ParamError{"id", kind + " id '" + shown + "' is not 32 lower-case hex digits"};
}

}  // namespace detail

ApiResponse error_response(int status, const std::string& message) {
  ApiResponse r;
  r.status = status;
  r.body = {{"error", message}};
  return r;
}

ApiResponse status_response(const Status& st) {
  switch (st.code()) {
    case Code::invalid_argument: return error_response(400, st.message());
    case Code::not_found: return error_response(404, st.message());
    case Code::unavailable:
    case Code::timeout: return error_response(503, "the GCS did not answer: " + st.to_string());
    default: return error_response(500, st.to_string());
  }
}

ApiResponse handle_api(gcs::Store& store, const ApiRequest& request, const ApiContext& context) {
  const QueryParams q(request.params);
  const std::string& p = request.path;
  // "/api/<collection>/<id>": the id is everything after the second slash, checked by the handler.
  auto item = [&](const std::string& collection, std::string* id) {
    const std::string prefix = "/api/" + collection + "/";
    if (p.size() <= prefix.size() || p.compare(0, prefix.size(), prefix) != 0) return false;
    *id = p.substr(prefix.size());
    return true;
  };
  try {
    std::string id;
    if (p == "/api/cluster") return detail::get_cluster(store, q);
    if (p == "/api/nodes") return detail::get_nodes(store, q);
    if (item("nodes", &id)) return detail::get_node(store, q, id);
    if (p == "/api/actors") return detail::get_actors(store, q);
    if (p == "/api/jobs") return detail::get_jobs(store, q);
    if (item("jobs", &id)) {
      const std::string suffix = "/timeline";
      if (id.size() > suffix.size() && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0)
        return detail::get_job_timeline(store, q, id.substr(0, id.size() - suffix.size()));
      return detail::get_job(store, q, id);
    }
    if (p == "/api/searches") return detail::get_searches(store, q);
    if (item("searches", &id)) return detail::get_search(store, q, id);
    if (p == "/api/events") return detail::get_events(store, q);
    if (p == "/api/metrics") return detail::get_metrics(store, q);
    if (p == "/api/logs") return detail::get_logs(store, q, context);
  } catch (const std::exception& e) {
    // Nothing below should throw (Expected everywhere); a JSON type error would be a bug.
    return error_response(500, std::string("internal error answering ") + p + ": " + e.what());
  }
  return error_response(404, "no API endpoint " + (p.size() > 128 ? p.substr(0, 128) + "..." : p) +
                                 "; see docs/dashboard.md (/api/cluster, /api/nodes, /api/actors, /api/jobs, "
                                 "/api/jobs/<id>/timeline, /api/searches, /api/events, /api/metrics, /api/logs, "
                                 "/api/stream)");
}

}  // namespace troupe::dashboard
