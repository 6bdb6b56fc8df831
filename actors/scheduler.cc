#include "actors/scheduler.h"

#include "actors/failure_detector.h"  // node_state_text

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace troupe::actors {

using gcs::NodeState;
using gcs::Resources;

const char* placement_policy_name(PlacementPolicy p) {
  return p == PlacementPolicy::pack ? "pack" : "spread";
}

Expected<PlacementPolicy> parse_placement_policy(const std::string& text) {
  if (text == "pack") return PlacementPolicy::pack;
  if (text == "spread") return PlacementPolicy::spread;
  return invalid_argument("scheduler policy '" + text + "' is not one of pack, spread");
}

std::vector<NodeView> node_views(const std::vector<gcs::NodeRecord>& nodes) {
  std::vector<NodeView> view;
  view.reserve(nodes.size());
  for (const auto& n : nodes) view.push_back({n.id, n.state, n.total, n.used});
  return view;
}

namespace {

constexpr double kEps = 1e-9;

std::string amount(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f B", b);
  else std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

// The three kinds of resource, for messages and per-kind loops.
enum Kind { kCpus = 0, kGpus = 1, kMemory = 2 };
constexpr Kind kKinds[] = {kCpus, kGpus, kMemory};

double get(const Resources& r, Kind k) {
  return k == kCpus ? r.cpus : k == kGpus ? r.gpus : static_cast<double>(r.memory_bytes);
}

std::string quantity(Kind k, double x) {
  if (k == kMemory) return bytes_text(x) + " memory";
  return amount(x) + (k == kCpus ? (x == 1 ? " cpu" : " cpus") : (x == 1 ? " gpu" : " gpus"));
}

std::string node_name(const NodeId& id) { return "node " + id.short_hex(); }


double free_of(const NodeView& n, Kind k) { return get(n.total, k) - get(n.used, k); }

bool fits(const Resources& demand, const NodeView& n) {
  for (Kind k : kKinds) {
    if (get(demand, k) > free_of(n, k) + (k == kMemory ? 0.0 : kEps)) return false;
  }
  return true;
}

// Critical utilisation: the largest used/total over the kinds the node has.
double load(const NodeView& n) {
  double l = 0;
  for (Kind k : kKinds) {
    double total = get(n.total, k);
    if (total > 0) l = std::max(l, get(n.used, k) / total);
  }
  return l;
}

void add(Resources* used, const Resources& d) {
  used->cpus += d.cpus;
  used->gpus += d.gpus;
  used->memory_bytes += d.memory_bytes;
}

Status validate(const std::vector<NodeView>& nodes, const std::vector<PlacementRequest>& requests) {
  std::set<NodeId> node_ids;
  for (const auto& n : nodes) {
    if (!node_ids.insert(n.id).second) {
      return invalid_argument("scheduler: node " + n.id.hex() + " appears twice in the cluster view");
    }
  }
  std::set<ActorId> actor_ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    const std::string who = "scheduler: request " + std::to_string(i) + " (actor " + r.actor.hex() + ")";
    if (r.actor.nil()) return invalid_argument("scheduler: request " + std::to_string(i) + " has a nil actor id");
    if (!actor_ids.insert(r.actor).second) return invalid_argument(who + " is requested twice in one batch");
    const double d[] = {r.demand.cpus, r.demand.gpus};
    const char* names[] = {"cpus", "gpus"};
    for (int k = 0; k < 2; ++k) {
      if (!std::isfinite(d[k]) || d[k] < 0) {
        return invalid_argument(who + " demands " + amount(d[k]) + " " + names[k] +
                                "; a demand must be a finite number >= 0");
      }
    }
    if (r.demand.memory_bytes < 0) {
      return invalid_argument(who + " demands " + std::to_string(r.demand.memory_bytes) +
                              " bytes of memory; a demand must be >= 0");
    }
  }
  return {};
}

// The placement of one schedule() call over a view sorted by node id.
class Placer {
 public:
  Placer(std::vector<NodeView>* nodes, PlacementPolicy policy, NodeId* last_spread)
      : nodes_(*nodes), policy_(policy), last_spread_(*last_spread) {}

  // Index of the node chosen for `r`, or -1 when none fits.
  int choose(const PlacementRequest& r) const {
    if (r.pinned_node) {
      int i = find(*r.pinned_node);
      return (i >= 0 && nodes_[i].state == NodeState::alive && fits(r.demand, nodes_[i])) ? i : -1;
    }
    const int n = static_cast<int>(nodes_.size());
    // SPREAD's round-robin starts after the node placed on last.
    const int start = static_cast<int>(
        std::upper_bound(nodes_.begin(), nodes_.end(), last_spread_,
                         [](const NodeId& id, const NodeView& v) { return id < v.id; }) -
        nodes_.begin());
    const bool avoid_gpu_nodes = r.demand.gpus <= 0;
    int best = -1;
    std::tuple<bool, double, int> best_key;
    for (int i = 0; i < n; ++i) {
      const NodeView& v = nodes_[i];
      if (v.state != NodeState::alive || !fits(r.demand, v) || (r.avoid_node && v.id == *r.avoid_node)) continue;
      const bool penalty = avoid_gpu_nodes && v.total.gpus > 0;
      const double l = policy_ == PlacementPolicy::pack ? -load(v) : load(v);
      const int order = policy_ == PlacementPolicy::pack ? i : (i - start + n) % n;
      auto key = std::make_tuple(penalty, l, order);
      if (best < 0 || key < best_key) best = i, best_key = key;
    }
    return best;
  }

  void place(int i, const PlacementRequest& r) {
    add(&nodes_[i].used, r.demand);
    if (policy_ == PlacementPolicy::spread) last_spread_ = nodes_[i].id;
  }

  // Why `r` fits no node of the current view.
  std::string why_not(const PlacementRequest& r) const {
    if (r.pinned_node) {
      int i = find(*r.pinned_node);
      const std::string name = "pinned " + node_name(*r.pinned_node);
      if (i < 0) return name + " is not in the cluster";
      const NodeView& v = nodes_[i];
      if (v.state != NodeState::alive) return name + " is " + node_state_text(v.state);
      for (Kind k : kKinds) {
        if (get(r.demand, k) > free_of(v, k) + (k == kMemory ? 0.0 : kEps)) {
          return "needs " + quantity(k, get(r.demand, k)) + "; " + name + " has " +
                 quantity(k, std::max(0.0, free_of(v, k))) + " free";
        }
      }
      return "needs " + describe_resources(r.demand) + "; " + name + " has it free";  // not reached
    }
    if (r.avoid_node) {  // the one node with room may be the one to avoid
      const int i = find(*r.avoid_node);
      if (i >= 0 && nodes_[i].state == NodeState::alive && fits(r.demand, nodes_[i]))
        return "needs " + describe_resources(r.demand) + " on another node than " + node_name(*r.avoid_node) +
               " (a restart --restart-on other), and only that one has it free";
    }
    int alive = 0, suspect = 0, dead = 0;
    for (const auto& v : nodes_) {
      alive += v.state == NodeState::alive;
      suspect += v.state == NodeState::suspect;
      dead += v.state == NodeState::dead;
    }
    if (nodes_.empty()) return "no node has joined the cluster";
    if (alive == 0) {
      return "no alive node (" + std::to_string(suspect) + " SUSPECT, " + std::to_string(dead) + " DEAD)";
    }
    std::string most;  // the largest free of each kind, for the fragmentation message
    for (Kind k : kKinds) {
      const double want = get(r.demand, k);
      if (want <= 0) continue;
      int best = -1;
      for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
        if (nodes_[i].state != NodeState::alive) continue;
        if (best < 0 || free_of(nodes_[i], k) > free_of(nodes_[best], k)) best = i;
      }
      const double largest = std::max(0.0, free_of(nodes_[best], k));
      if (want > largest + (k == kMemory ? 0.0 : kEps)) {
        if (largest <= 0) {
          return "needs " + quantity(k, want) + "; none free on " + std::to_string(alive) + " alive node" +
                 (alive == 1 ? "" : "s");
        }
        std::string q = quantity(k, largest);
        if (k != kMemory) q = q.substr(0, q.find(' '));  // "is 1", not "is 1 gpu"
        return "needs " + quantity(k, want) + "; largest free on an alive node is " + q + " (" +
               node_name(nodes_[best].id) + ")";
      }
      most += (most.empty() ? "" : ", ") + quantity(k, largest) + " on " + node_name(nodes_[best].id);
    }
    return "needs " + describe_resources(r.demand) + "; no alive node has all of it free (largest free: " +
           most + ")";
  }

  // When the gang's summed demand exceeds what all alive nodes have free, that sentence; else "".
  std::string gang_shortfall(const std::string& group, const std::vector<const PlacementRequest*>& members) const {
    Resources sum;
    for (const auto* m : members) add(&sum, m->demand);
    int alive = 0;
    double free_total[3] = {0, 0, 0};
    for (const auto& v : nodes_) {
      if (v.state != NodeState::alive) continue;
      ++alive;
      for (Kind k : kKinds) free_total[k] += std::max(0.0, free_of(v, k));
    }
    if (alive == 0) return "";
    for (Kind k : kKinds) {
      if (get(sum, k) > free_total[k] + (k == kMemory ? 0.0 : kEps)) {
        std::string have = quantity(k, free_total[k]);
        if (k != kMemory) have = have.substr(0, have.find(' '));
        return "gang '" + group + "' of " + std::to_string(members.size()) + " needs " + quantity(k, get(sum, k)) +
               "; " + have + " free across " + std::to_string(alive) + " alive node" + (alive == 1 ? "" : "s");
      }
    }
    return "";
  }

 private:
  int find(const NodeId& id) const {
    auto it = std::lower_bound(nodes_.begin(), nodes_.end(), id,
                               [](const NodeView& v, const NodeId& x) { return v.id < x; });
    return (it != nodes_.end() && it->id == id) ? static_cast<int>(it - nodes_.begin()) : -1;
  }

  std::vector<NodeView>& nodes_;
  PlacementPolicy policy_;
  NodeId& last_spread_;
};

}  // namespace

std::string describe_resources(const Resources& r) {
  std::string out;
  for (Kind k : kKinds) {
    if (get(r, k) == 0) continue;
    out += (out.empty() ? "" : ", ") + quantity(k, get(r, k));
  }
  return out.empty() ? "nothing" : out;
}

Expected<ScheduleResult> Scheduler::schedule(const std::vector<NodeView>& nodes,
                                             const std::vector<PlacementRequest>& requests) {
  TROUPE_RETURN_IF_ERROR(validate(nodes, requests));
  ScheduleResult result;
  result.nodes = nodes;
  std::sort(result.nodes.begin(), result.nodes.end(),
            [](const NodeView& a, const NodeView& b) { return a.id < b.id; });
  Placer placer(&result.nodes, options_.policy, &last_spread_node_);

  // Gang members by group, in request order.
  std::map<std::string, std::vector<const PlacementRequest*>> gangs;
  for (const auto& r : requests) {
    if (!r.group.empty()) gangs[r.group].push_back(&r);
  }
  std::set<std::string> done;

  for (const auto& r : requests) {
    if (r.group.empty()) {
      int i = placer.choose(r);
      if (i >= 0) {
        placer.place(i, r);
        result.placements.push_back({r.actor, result.nodes[i].id});
      } else {
        result.pending.push_back({r.actor, "", placer.why_not(r)});
      }
      continue;
    }
    if (!done.insert(r.group).second) continue;
    // A gang: place its members on a copy of the view; keep the copy only if all fit.
    const auto& members = gangs[r.group];
    const std::vector<NodeView> saved_nodes = result.nodes;
    const NodeId saved_cursor = last_spread_node_;
    std::vector<Placement> tentative;
    std::string failure;
    for (size_t m = 0; m < members.size(); ++m) {
      int i = placer.choose(*members[m]);
      if (i < 0) {
        std::string member_reason = placer.why_not(*members[m]);
        result.nodes = saved_nodes;  // roll back before measuring the gang against the whole view
        last_spread_node_ = saved_cursor;
        std::string shortfall = members[m]->pinned_node ? "" : placer.gang_shortfall(r.group, members);
        failure = !shortfall.empty()
                      ? shortfall
                      : "gang '" + r.group + "' of " + std::to_string(members.size()) + ": member " +
                            std::to_string(m + 1) + " (actor " + members[m]->actor.short_hex() + ") fits nowhere" +
                            (m > 0 ? " once " + std::to_string(m) + " are placed" : "") + ": " + member_reason;
        break;
      }
      placer.place(i, *members[m]);
      tentative.push_back({members[m]->actor, result.nodes[i].id});
    }
    if (failure.empty()) {
      result.placements.insert(result.placements.end(), tentative.begin(), tentative.end());
    } else {
      for (const auto* m : members) result.pending.push_back({m->actor, r.group, failure});
    }
  }
  return result;
}

}  // namespace troupe::actors
