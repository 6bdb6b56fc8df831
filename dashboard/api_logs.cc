// /api/logs: bounded tails of the cluster processes' log files.
//
// The head reads files, not nodes: a node's log is served when the node runs on the head's host
// (its NodeRecord's hostname is this host's) and its spdlog file (core/logging.h:
// <log_dir>/troupe-node-<pid>.log, or troupe-head-<pid>.log) is in the head's log directory — a
// local cluster's, where every process logs into the session. Every other node is listed under
// "unavailable" with the reason (and the command that prints its log on its own host), instead of
// the head asking remote nodes for their files: that keeps the dashboard free of the actor layer
// and a slow node cannot hold an answer up.
#include <algorithm>

#include "dashboard/api_handlers.h"
#include "dashboard/log_tail.h"
#include "gcs/tables.h"

namespace troupe::dashboard::detail {
namespace {

using nlohmann::json;

bool has_prefix(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

}  // namespace

ApiResponse get_logs(gcs::Store& store, const QueryParams& q, const ApiContext& context) {
  if (auto e = q.check_known({"node", "actor", "job", "lines"})) return param_error(*e);
  std::string node, actor, job;
  int64_t lines = 0;
  if (auto e = q.hex_prefix("node", &node)) return param_error(*e);
  if (auto e = q.hex_prefix("actor", &actor)) return param_error(*e);
  if (auto e = q.hex_prefix("job", &job)) return param_error(*e);
  if (auto e = q.integer("lines", 1, kMaxLogLines, kDefaultLogLines, &lines)) return param_error(*e);
  auto nodes = gcs::Table<gcs::NodeRecord>(store).list();
  if (!nodes.ok()) return status_response(nodes.status());
  TailOptions to;
  to.lines = static_cast<size_t>(lines);
  // actor=: the node hosting it, lines naming it (its short id, or "job <j> worker <i>" for a job's).
  if (!actor.empty()) {
    auto actors = gcs::Table<gcs::ActorRecord>(store).list();
    if (!actors.ok()) return status_response(actors.status());
    const gcs::ActorRecord* found = nullptr;
    for (const gcs::ActorRecord& a : *actors)
      if (has_prefix(a.id.hex(), actor)) found = &a;
    if (!found) return error_response(404, "no actor " + actor);
    if (!node.empty() && !has_prefix(found->node.hex(), node)) {
      return error_response(404, "actor " + found->id.short_hex() + " is not on node " + node);
    }
    node = found->node.hex();
    to.needles.push_back(found->id.short_hex());
    if (!found->job.nil()) {
      auto j = gcs::Table<gcs::JobRecord>(store).get(found->job.hex());
      if (j.ok()) {
        const auto it = std::find(j->actors.begin(), j->actors.end(), found->id.hex());
        const std::string index = std::to_string(it - j->actors.begin());
        if (it != j->actors.end()) {
          to.needles.push_back("job " + j->id.short_hex() + " worker " + index);
          to.needles.push_back("job " + j->id.short_hex() + " actor " + index);
          to.needles.push_back("job " + j->id.short_hex() + " ps " + index);
        }
      }
    }
  }
  // job=: lines about the job in every log (its actors log "job <short id> ...").
  if (!job.empty()) {
    auto jobs = gcs::Table<gcs::JobRecord>(store).list();
    if (!jobs.ok()) return status_response(jobs.status());
    std::string short_id;
    for (const gcs::JobRecord& j : *jobs)
      if (has_prefix(j.id.hex(), job)) short_id = j.id.short_hex();
    if (short_id.empty()) return error_response(404, "no job " + job);
    if (to.needles.empty()) {
      to.needles.push_back("job " + short_id);
    } else {  // actor= and job=: that actor's lines about that job
      to.needles.erase(std::remove_if(to.needles.begin(), to.needles.end(),
                                      [&](const std::string& n) { return n.find(short_id) == std::string::npos; }),
                       to.needles.end());
      if (to.needles.empty()) return error_response(404, "actor " + actor + " is not an actor of job " + job);
    }
  }
  std::vector<const gcs::NodeRecord*> picked;
  for (const gcs::NodeRecord& n : *nodes)
    if (has_prefix(n.id.hex(), node)) picked.push_back(&n);
  if (picked.empty()) return error_response(404, "no node " + node);
  std::sort(picked.begin(), picked.end(), [](const auto* a, const auto* b) {
    return a->is_head != b->is_head ? a->is_head : a->started_ms < b->started_ms;
  });
  ApiResponse r;
  r.body = {{"logs", json::array()}, {"unavailable", json::array()}, {"lines", lines}, {"truncated", false}};
  size_t bytes = 0;
  for (const gcs::NodeRecord* n : picked) {
    auto unavailable = [&](const std::string& why) {
      r.body["unavailable"].push_back({{"node", n->id.hex()}, {"hostname", n->hostname}, {"reason", why}});
    };
    if (context.log_dir.empty()) {
      unavailable("the dashboard was not told where logs are (no log directory)");
      continue;
    }
    if (n->hostname != context.hostname) {
      unavailable("node runs on host " + n->hostname + "; the dashboard reads log files on its own host (" +
                  context.hostname + ") only: run `troupe logs " + n->id.short_hex() + "` on " + n->hostname);
      continue;
    }
    const std::string path = process_log_file(context.log_dir, n->is_head, n->pid);
    if (path.empty()) {
      unavailable("no log file of pid " + std::to_string(n->pid) + " in " + context.log_dir);
      continue;
    }
    auto tail = tail_file(path, to);
    if (!tail.ok()) {
      unavailable(tail.status().message());
      continue;
    }
    // The answer's bytes are bounded: once over, older lines of later nodes are left out.
    std::vector<std::string>& kept = tail->lines;
    size_t first = kept.size();
    while (first > 0 && bytes + kept[first - 1].size() + 1 <= kMaxLogAnswerBytes) bytes += kept[--first].size() + 1;
    if (first > 0) r.body["truncated"] = true;
    r.body["logs"].push_back({{"node", n->id.hex()}, {"hostname", n->hostname}, {"state", gcs::node_state_name(n->state)},
                              {"is_head", n->is_head}, {"file", path}, {"file_bytes", tail->file_bytes},
                              {"scanned_all", tail->scanned_all},
                              {"lines", json(std::vector<std::string>(kept.begin() + static_cast<std::ptrdiff_t>(first), kept.end()))}});
  }
  return r;
}

}  // namespace troupe::dashboard::detail
