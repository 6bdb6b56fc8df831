// The dashboard's JSON API (docs/dashboard.md), as a function from a request to an answer, with no
// HTTP in it: dashboard_server.h routes GET /api/... here, and tests call it directly too.
//
//   /api/cluster          gcs::cluster_view's document: what `troupe status --json` prints
//   /api/nodes            nodes (filter: state)             /api/nodes/<id>  a node and its actors
//   /api/actors           actors (filters: state, node, type, job, q; limit)
//   /api/jobs             jobs, newest first (filter: state) /api/jobs/<id>   a job, its actors, its
//                                                                             recent metrics, its group
//   /api/jobs/<id>/timeline  the workers' step timelines, straggler, stuck collective (or a Chrome trace)
//   /api/searches         hyperparameter searches, newest first (filter: state)
//   /api/searches/<id>    a search (id or unique prefix): its trials, their settings and metric per epoch
//   /api/events           newest events (filters: kind, subject, since; limit)
//   /api/metrics          newest metric samples (filter: prefix; limit)
//   /api/logs             bounded tails of the nodes' log files (filters: node, actor, job; lines)
//
// Every answer is a JSON object. Errors are {"error": "..."} (with "parameter" for a bad one):
// 400 malformed or out-of-range parameters and ids, 404 unknown paths and ids, 503 the GCS did not
// answer, 500 anything else (a record that does not decode). Every list is bounded; nodes, a
// node's actors, actors, jobs and searches come a page at a time (limit, after, offset:
// api_paging.h).
#pragma once

#include <functional>

#include "dashboard/log_tail.h"
#include "gcs/records.h"

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "gcs/store.h"

namespace troupe::dashboard {

// Bounds of the list endpoints' `limit` (and of /api/jobs/<id>'s `metrics`).
constexpr int64_t kDefaultLimit = 500;
constexpr int64_t kMaxLimit = 10000;
constexpr int64_t kDefaultEventLimit = 100;
constexpr int64_t kMaxViewEvents = 1000;  // /api/cluster's and /api/stream's `events`
constexpr int64_t kMaxViewActors = 1000000000;  // their `actors`: the default, all of them
// /api/logs: lines per node (default, most), and the most bytes of lines in one answer.
constexpr int64_t kDefaultLogLines = 200;
constexpr int64_t kMaxLogLines = 5000;
constexpr size_t kMaxLogAnswerBytes = 1 << 20;

struct ApiRequest {
  std::string path;                                 // "/api/jobs/<id>", already URL-decoded
  std::multimap<std::string, std::string> params;   // the query, decoded
};

// What the API knows besides the GCS: where this head's processes log (for /api/logs).
struct ApiContext {
  std::string log_dir;    // the head's log directory; nodes on this host log there too
  std::string hostname;   // this host's name: the nodes whose NodeRecord names it are readable here
  // Asks an ALIVE node's process for the tail of its own log (the head wires it to the node
  // managers, bounded by a deadline); empty: only files on this host are read.
  std::function<Expected<Tail>(const gcs::NodeRecord&, const TailOptions&)> remote_tail;
};

struct ApiResponse {
  int status = 200;
  nlohmann::json body = nlohmann::json::object();
};

// Answers one GET under /api. Reads the GCS through `store` (which must be safe to use from the
// calling thread); never throws.
ApiResponse handle_api(gcs::Store& store, const ApiRequest& request, const ApiContext& context = {});

// {"error": message} with `status`.
ApiResponse error_response(int status, const std::string& message);
// The HTTP status of a failed GCS read: 400 invalid_argument, 404 not_found, 503 unavailable and
// timeout (the GCS is down or slow), 500 the rest.
ApiResponse status_response(const Status& status);

}  // namespace troupe::dashboard
