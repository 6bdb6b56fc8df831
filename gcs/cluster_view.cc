#include "gcs/cluster_view.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>

#include "gcs/events.h"
#include "gcs/records.h"
#include "gcs/search_record.h"
#include "gcs/tables.h"

namespace troupe::gcs {
namespace {

using nlohmann::json;

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == static_cast<int64_t>(v) ? "%.0f" : "%.1f", v);
  return buf;
}

std::string clock_time(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

std::string age(int64_t ms) {
  if (ms < 0) return "never";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs ago", static_cast<double>(ms) / 1000.0);
  return buf;
}

json resources_json(const Resources& r) {
  return {{"cpus", r.cpus}, {"gpus", r.gpus}, {"memory_bytes", r.memory_bytes}};
}

// "gpu 0", "gpus 0,1".
std::string gpu_list(const json& ids) {
  std::string out = ids.size() == 1 ? "gpu " : "gpus ";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i].get<int>());
  return out;
}

// Lines for people beyond the first `kMaxActorLines` of a kind are counted, not listed.
constexpr int kMaxActorLines = 10;

}  // namespace

json node_json(const NodeRecord& n, int64_t now) {
  json gpus = json::array();
  for (const GpuInfo& g : n.gpus) gpus.push_back({{"index", g.index}, {"name", g.name}, {"memory_bytes", g.memory_bytes}});
  return {{"id", n.id.hex()},
          {"state", node_state_name(n.state)},
          {"address", n.address},
          {"hostname", n.hostname},
          {"pid", n.pid},
          {"is_head", n.is_head},
          {"version", n.version},
          {"resources", {{"total", resources_json(n.total)}, {"used", resources_json(n.used)}}},
          {"gpus", gpus},
          {"started_ms", n.started_ms},
          {"last_heartbeat_ms", n.last_heartbeat_ms},
          {"heartbeat_age_ms", n.last_heartbeat_ms ? now - n.last_heartbeat_ms : -1},
          {"death_reason", n.death_reason}};
}

json actor_json(const ActorRecord& a) {
  return {{"id", a.id.hex()},          {"type", a.type_name},
          {"name", a.name},            {"job", a.job.nil() ? "" : a.job.hex()},
          {"node", a.node.nil() ? "" : a.node.hex()},
          {"state", actor_state_name(a.state)},
          {"restarts", a.restarts},    {"resources", resources_json(a.resources)},
          {"pending_reason", a.pending_reason},
          {"death_reason", a.death_reason},
          {"updated_ms", a.updated_ms},
          {"gpu_ids", a.gpu_ids}};
}

json job_json(const JobRecord& j) {
  json out{{"id", j.id.hex()},         {"name", j.name},         {"strategy", j.strategy},
           {"state", job_state_name(j.state)},
           {"workers", j.workers},     {"ps", j.ps},             {"progress", j.progress},
           {"submitted_ms", j.submitted_ms}, {"finished_ms", j.finished_ms}, {"updated_ms", j.updated_ms},
           {"message", j.message},     {"actors", j.actors},     {"epoch", j.epoch},
           {"epochs", j.epochs},       {"step", j.step},         {"steps", j.steps},
           {"loss", j.loss},           {"samples_per_second", j.samples_per_second},
           {"eta_seconds", j.eta_seconds}, {"test_accuracy", j.test_accuracy}, {"spec", j.spec}};
  // The result is the JSON summary the job's rank 0 wrote; kept as text if it does not parse.
  if (!j.result.empty()) {
    json r = json::parse(j.result, nullptr, false);
    out["result"] = r.is_discarded() ? json(j.result) : r;
  }
  return out;
}

bool node_display_order(const NodeRecord& a, const NodeRecord& b) {
  if (a.is_head != b.is_head) return a.is_head;
  return a.started_ms != b.started_ms ? a.started_ms < b.started_ms : a.id < b.id;
}

json event_json(const Event& e) {
  return {{"time_ms", e.time_ms}, {"kind", e.kind}, {"subject", e.subject}, {"message", e.message}};
}

Expected<json> cluster_view(Store& store, const ViewOptions& options) {
  const int64_t now = options.now_ms ? options.now_ms : now_ms();
  auto nodes = Table<NodeRecord>(store).list();
  if (!nodes.ok()) return nodes.status();
  auto actors = Table<ActorRecord>(store).list();
  if (!actors.ok()) return actors.status();
  auto jobs = Table<JobRecord>(store).list();
  if (!jobs.ok()) return jobs.status();
  auto events = recent_events(store, options.events);
  if (!events.ok()) return events.status();
  auto searches = list_searches(store);
  if (!searches.ok()) return searches.status();

  json view{{"nodes", json::array()}, {"actors", json::array()}, {"jobs", json::array()}, {"events", json::array()}};
  std::map<std::string, int> node_states, actor_states;
  std::sort(nodes->begin(), nodes->end(), node_display_order);
  for (const NodeRecord& n : *nodes) {
    view["nodes"].push_back(node_json(n, now));
    ++node_states[node_state_name(n.state)];
  }
  std::sort(actors->begin(), actors->end(), [](const ActorRecord& a, const ActorRecord& b) { return a.id < b.id; });
  for (const ActorRecord& a : *actors) {
    if (view["actors"].size() < options.actors) view["actors"].push_back(actor_json(a));
    ++actor_states[actor_state_name(a.state)];
  }
  for (const JobRecord& j : *jobs) view["jobs"].push_back(job_json(j));
  for (const Event& e : *events) {
    view["events"].push_back(event_json(e));
  }
  std::sort(searches->begin(), searches->end(),
            [](const SearchRecord& a, const SearchRecord& b) { return a.created_ms < b.created_ms; });
  view["searches"] = json::array();
  for (const SearchRecord& s : *searches) view["searches"].push_back(search_brief_json(s));
  view["summary"] = {{"nodes", nodes->size()}, {"nodes_by_state", node_states},
                     {"actors", actors->size()}, {"actors_by_state", actor_states}, {"jobs", jobs->size()},
                     {"searches", searches->size()}, {"now_ms", now}};
  return view;
}

std::string render_cluster_view(const json& v) {
  std::ostringstream os;
  char line[512];
  const auto& nodes = v.at("nodes");
  os << "NODES (" << nodes.size() << ")\n";
  std::snprintf(line, sizeof line, "  %-8s %-7s %-21s %-11s %-7s %-13s %s\n", "ID", "STATE", "ADDRESS", "CPUS",
                "GPUS", "MEMORY GiB", "HEARTBEAT");
  os << line;
  for (const auto& n : nodes) {
    const auto& t = n.at("resources").at("total");
    const auto& u = n.at("resources").at("used");
    std::string cpus = num(u.at("cpus")) + "/" + num(t.at("cpus"));
    std::string gpus = num(u.at("gpus")) + "/" + num(t.at("gpus"));
    std::string mem = gib(u.at("memory_bytes")) + "/" + gib(t.at("memory_bytes"));
    std::string extra = n.at("is_head").get<bool>() ? "  (head)" : "";
    if (!n.at("death_reason").get<std::string>().empty()) extra += "  " + n.at("death_reason").get<std::string>();
    std::snprintf(line, sizeof line, "  %-8s %-7s %-21s %-11s %-7s %-13s %s%s\n",
                  n.at("id").get<std::string>().substr(0, 8).c_str(), n.at("state").get<std::string>().c_str(),
                  n.at("address").get<std::string>().c_str(), cpus.c_str(), gpus.c_str(), mem.c_str(),
                  age(n.at("heartbeat_age_ms")).c_str(), extra.c_str());
    os << line;
  }
  const auto& actors = v.at("actors");
  os << "\nACTORS (" << actors.size() << ")";
  for (const auto& [state, count] : v.at("summary").at("actors_by_state").items()) os << "  " << state << " " << count;
  os << "\n";
  std::map<std::string, int> per_node;
  int pending_shown = 0, on_gpus = 0;
  for (const auto& a : actors) {
    if (a.at("state") == "ALIVE") ++per_node[a.at("node").get<std::string>().substr(0, 8)];
    if (a.at("state") == "PENDING" && pending_shown < kMaxActorLines) {
      ++pending_shown;
      os << "  PENDING " << a.at("id").get<std::string>().substr(0, 8) << " " << a.at("type").get<std::string>()
         << ": " << a.at("pending_reason").get<std::string>() << "\n";
    }
  }
  // Live actors holding GPUs get a line each: which device is whose is what the counts cannot say.
  for (const auto& a : actors) {
    const json* gpus = a.contains("gpu_ids") ? &a.at("gpu_ids") : nullptr;
    if (a.at("state") != "ALIVE" || !gpus || gpus->empty()) continue;
    if (++on_gpus > kMaxActorLines) continue;
    os << "  ALIVE   " << a.at("id").get<std::string>().substr(0, 8) << " " << a.at("type").get<std::string>()
       << " on " << a.at("node").get<std::string>().substr(0, 8) << ": " << gpu_list(*gpus) << "\n";
  }
  if (on_gpus > kMaxActorLines) {
    os << "  ... " << on_gpus - kMaxActorLines << " more live actors on GPUs (troupe status --json lists them)\n";
  }
  if (!per_node.empty()) {
    os << "  alive by node:";
    for (const auto& [node, count] : per_node) os << "  " << node << " " << count;
    os << "\n";
  }
  const auto& jobs = v.at("jobs");
  os << "\nJOBS (" << jobs.size() << ")\n";
  for (const auto& j : jobs) {
    const double acc = j.at("test_accuracy").get<double>();
    char accuracy[32] = "-";
    if (acc >= 0) std::snprintf(accuracy, sizeof accuracy, "%.4f", acc);
    // A prediction job's progress is in rows (step of steps), not epochs.
    char where[64];
    if (j.at("strategy") == "predict")
      std::snprintf(where, sizeof where, "rows %lld/%lld", static_cast<long long>(j.at("step").get<int64_t>()),
                    static_cast<long long>(j.at("steps").get<int64_t>()));
    else
      std::snprintf(where, sizeof where, "epoch %d/%d", j.at("epoch").get<int>(), j.at("epochs").get<int>());
    std::snprintf(line, sizeof line, "  %-8s %-10s %-8s %2d workers  %s  %5.1f%%  acc %s  %s\n",
                  j.at("id").get<std::string>().substr(0, 8).c_str(), j.at("state").get<std::string>().c_str(),
                  j.at("strategy").get<std::string>().c_str(), j.at("workers").get<int>(), where,
                  100.0 * j.at("progress").get<double>(), accuracy, j.at("message").get<std::string>().c_str());
    os << line;
  }
  const auto& events = v.at("events");
  os << "\nEVENTS (last " << events.size() << ")\n";
  for (const auto& e : events) {
    os << "  " << clock_time(e.at("time_ms")) << "  " << e.at("kind").get<std::string>() << "  "
       << e.at("subject").get<std::string>().substr(0, 8) << "  " << e.at("message").get<std::string>() << "\n";
  }
  return os.str();
}

}  // namespace troupe::gcs
