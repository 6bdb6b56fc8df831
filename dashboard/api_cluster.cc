// /api/cluster, /api/nodes, /api/nodes/<id>, /api/actors: the cluster's tables, read from the GCS
// and rendered with gcs/cluster_view.h's entries, so they agree with `troupe status --json`.
#include <algorithm>
#include <cctype>

#include "dashboard/api_handlers.h"
#include "dashboard/api_paging.h"
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

  bool empty() const { return state.empty() && node.empty() && job.empty() && type.empty() && q.empty(); }

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

// Actors are listed in id order; the cursor is an actor's id.
const char* const kActorCursor = "an actor id (32 hex digits)";
Position actor_position(const gcs::ActorRecord& a) { return {{}, a.id.hex()}; }

// One page of the matching actors in id order. With no filter the page reads the table's keys and
// only its own records (a 10,000-actor table is not decoded for a page of 100); a filter reads and
// matches every record.
ApiResponse actor_page(gcs::Store& store, const ActorFilter& filter, const PageRequest& page) {
  gcs::Table<gcs::ActorRecord> table(store);
  ApiResponse r;
  if (filter.empty()) {
    auto keys = table.keys();
    if (!keys.ok()) return status_response(keys.status());
    std::vector<Position> sorted;
    sorted.reserve(keys->size());
    for (std::string& k : *keys) sorted.push_back({{}, std::move(k)});
    std::sort(sorted.begin(), sorted.end());
    const PageSlice s = slice(sorted, page);
    std::vector<std::string> wanted;
    for (size_t i = s.begin; i < s.end; ++i) wanted.push_back(sorted[i].id);
    auto actors = table.get_many(wanted);  // in id order; one removed since the keys were read is left out
    if (!actors.ok()) return status_response(actors.status());
    r.body["actors"] = json::array();
    for (const gcs::ActorRecord& a : *actors) r.body["actors"].push_back(gcs::actor_json(a));
    describe_page(r.body, sorted, s, page);
    r.body["returned"] = r.body["actors"].size();
    return r;
  }
  auto actors = table.list();
  if (!actors.ok()) return status_response(actors.status());
  page_of(r.body, "actors", *actors, actor_position, [&](const gcs::ActorRecord& a) { return filter.matches(a); },
          gcs::actor_json, page);
  return r;
}

}  // namespace

std::optional<ParamError> read_view_options(const QueryParams& q, gcs::ViewOptions* out) {
  int64_t events = 0, actors = 0;
  if (auto e = q.check_known({"events", "actors"})) return e;
  if (auto e = q.integer("events", 0, kMaxViewEvents, 10, &events)) return e;
  if (auto e = q.integer("actors", 0, kMaxViewActors, kMaxViewActors, &actors)) return e;
  out->events = static_cast<size_t>(events);
  out->actors = actors == kMaxViewActors ? SIZE_MAX : static_cast<size_t>(actors);
  return std::nullopt;
}

ApiResponse get_cluster(gcs::Store& store, const QueryParams& q) {
  gcs::ViewOptions vo;
  if (auto e = read_view_options(q, &vo)) return param_error(*e);
  auto view = gcs::cluster_view(store, vo);
  if (!view.ok()) return status_response(view.status());
  ApiResponse r;
  r.body = std::move(*view);
  return r;
}

ApiResponse get_nodes(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"state", "limit", "offset", "after"})) return param_error(*e);
  std::string state;
  PageRequest page;
  if (auto e = q.one_of("state", {"ALIVE", "SUSPECT", "DEAD"}, &state)) return param_error(*e);
  if (auto e = read_page(q, 2, "<0 for a head, else 1>.<started_ms>.<node id>", &page)) return param_error(*e);
  auto nodes = gcs::Table<gcs::NodeRecord>(store).list();
  if (!nodes.ok()) return status_response(nodes.status());
  const int64_t now = gcs::now_ms();
  ApiResponse r;
  // gcs::node_display_order: heads first, then by start time, then by id.
  page_of(
      r.body, "nodes", *nodes,
      [](const gcs::NodeRecord& n) { return Position{{n.is_head ? 0 : 1, n.started_ms}, n.id.hex()}; },
      [&](const gcs::NodeRecord& n) { return state.empty() || state == gcs::node_state_name(n.state); },
      [&](const gcs::NodeRecord& n) { return gcs::node_json(n, now); }, page);
  r.body["now_ms"] = now;
  return r;
}

ApiResponse get_node(gcs::Store& store, const QueryParams& q, const std::string& id) {
  if (auto e = q.check_known({"limit", "offset", "after"})) return param_error(*e);
  PageRequest page;
  if (auto e = read_page(q, 0, kActorCursor, &page)) return param_error(*e);
  if (auto e = check_id("node", id)) return param_error(*e);
  auto node = gcs::Table<gcs::NodeRecord>(store).get(id);
  if (!node.ok()) {
    if (node.status().code() == Code::not_found) return error_response(404, "no node " + id);
    return status_response(node.status());
  }
  ActorFilter filter;
  filter.node = id;
  ApiResponse r = actor_page(store, filter, page);
  if (r.status != 200) return r;
  r.body["node"] = gcs::node_json(*node, gcs::now_ms());
  return r;
}

ApiResponse get_actors(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"state", "node", "job", "type", "q", "limit", "offset", "after"})) return param_error(*e);
  ActorFilter f;
  PageRequest page;
  if (auto e = q.one_of("state", {"PENDING", "ALIVE", "RESTARTING", "FINISHED", "DEAD"}, &f.state)) return param_error(*e);
  if (auto e = q.hex_prefix("node", &f.node)) return param_error(*e);
  if (auto e = q.hex_prefix("job", &f.job)) return param_error(*e);
  if (auto e = q.text("type", 128, &f.type)) return param_error(*e);
  if (auto e = q.text("q", 256, &f.q)) return param_error(*e);
  if (auto e = read_page(q, 0, kActorCursor, &page)) return param_error(*e);
  f.q = lower(f.q);
  return actor_page(store, f, page);
}

}  // namespace troupe::dashboard::detail
