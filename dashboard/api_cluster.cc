// /api/cluster, /api/nodes, /api/nodes/<id>, /api/actors: the cluster's tables, read from the GCS
// and rendered with gcs/cluster_view.h's entries, so they agree with `troupe status --json`.
#include <algorithm>
#include <cctype>

#include "dashboard/api_handlers.h"
#include "gcs/cluster_view.h"
#include "gcs/tables.h"

namespace troupe::dashboard::detail {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// The actor filters of /api/actors (all optional; "" matches everything).
struct ActorFilter {
  std::string state, node, job, type, q;  // node, job: hex prefixes; q: lower case

  bool matches(const gcs::ActorRecord& a) const {
    if (!state.empty() && state != gcs::actor_state_name(a.state)) return false;
    if (!node.empty() && (a.node.nil() || !starts_with(a.node.hex(), node))) return false;
    if (!job.empty() && (a.job.nil() || !starts_with(a.job.hex(), job))) return false;
    if (!type.empty() && type != a.type_name) return false;
    if (q.empty()) return true;
    for (const std::string* field : {&a.type_name, &a.name, &a.pending_reason, &a.death_reason}) {
      if (lower(*field).find(q) != std::string::npos) return true;
    }
    return a.id.hex().find(q) != std::string::npos || (!a.node.nil() && a.node.hex().find(q) != std::string::npos) ||
           (!a.job.nil() && a.job.hex().find(q) != std::string::npos);
  }
};

// Up to `limit` matching actors in id order, with the count of all matches.
ApiResponse actor_list(gcs::Store& store, const ActorFilter& filter, int64_t limit) {
  auto actors = gcs::Table<gcs::ActorRecord>(store).list();
  if (!actors.ok()) return status_response(actors.status());
  std::sort(actors->begin(), actors->end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  ApiResponse r;
  r.body["actors"] = json::array();
  int64_t total = 0;
  for (const gcs::ActorRecord& a : *actors) {
    if (!filter.matches(a)) continue;
    if (total++ < limit) r.body["actors"].push_back(gcs::actor_json(a));
  }
  r.body["total"] = total;
  r.body["returned"] = r.body["actors"].size();
  r.body["truncated"] = total > limit;
  return r;
}

}  // namespace

ApiResponse get_cluster(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"events"})) return param_error(*e);
  int64_t events = 0;
  if (auto e = q.integer("events", 0, kMaxViewEvents, 10, &events)) return param_error(*e);
  gcs::ViewOptions vo;
  vo.events = static_cast<size_t>(events);
  auto view = gcs::cluster_view(store, vo);
  if (!view.ok()) return status_response(view.status());
  ApiResponse r;
  r.body = std::move(*view);
  return r;
}

ApiResponse get_nodes(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"state"})) return param_error(*e);
  std::string state;
  if (auto e = q.one_of("state", {"ALIVE", "SUSPECT", "DEAD"}, &state)) return param_error(*e);
  auto nodes = gcs::Table<gcs::NodeRecord>(store).list();
  if (!nodes.ok()) return status_response(nodes.status());
  std::sort(nodes->begin(), nodes->end(), gcs::node_display_order);
  const int64_t now = gcs::now_ms();
  ApiResponse r;
  r.body["nodes"] = json::array();
  for (const gcs::NodeRecord& n : *nodes) {
    if (state.empty() || state == gcs::node_state_name(n.state)) r.body["nodes"].push_back(gcs::node_json(n, now));
  }
  r.body["total"] = r.body["nodes"].size();
  r.body["now_ms"] = now;
  return r;
}

ApiResponse get_node(gcs::Store& store, const QueryParams& q, const std::string& id) {
  if (auto e = q.check_known({"limit"})) return param_error(*e);
  int64_t limit = 0;
  if (auto e = q.integer("limit", 1, kMaxLimit, kDefaultLimit, &limit)) return param_error(*e);
  if (auto e = check_id("node", id)) return param_error(*e);
  auto node = gcs::Table<gcs::NodeRecord>(store).get(id);
  if (!node.ok()) {
    if (node.status().code() == Code::not_found) return error_response(404, "no node " + id);
    return status_response(node.status());
  }
  ActorFilter filter;
  filter.node = id;
  ApiResponse r = actor_list(store, filter, limit);
  if (r.status != 200) return r;
  r.body["node"] = gcs::node_json(*node, gcs::now_ms());
  return r;
}

ApiResponse get_actors(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"state", "node", "job", "type", "q", "limit"})) return param_error(*e);
  ActorFilter f;
  int64_t limit = 0;
  if (auto e = q.one_of("state", {"PENDING", "ALIVE", "RESTARTING", "DEAD"}, &f.state)) return param_error(*e);
  if (auto e = q.hex_prefix("node", &f.node)) return param_error(*e);
  if (auto e = q.hex_prefix("job", &f.job)) return param_error(*e);
  if (auto e = q.text("type", 128, &f.type)) return param_error(*e);
  if (auto e = q.text("q", 256, &f.q)) return param_error(*e);
  if (auto e = q.integer("limit", 1, kMaxLimit, kDefaultLimit, &limit)) return param_error(*e);
  f.q = lower(f.q);
  ApiResponse r = actor_list(store, f, limit);
  if (r.status == 200) r.body["limit"] = limit;
  return r;
}

}  // namespace troupe::dashboard::detail
