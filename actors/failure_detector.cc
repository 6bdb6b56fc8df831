#include "actors/failure_detector.h"

#include <algorithm>
#include <cstdio>

namespace troupe::actors {

using gcs::NodeState;

const char* node_state_text(NodeState s) {
  return s == NodeState::alive ? "ALIVE" : s == NodeState::suspect ? "SUSPECT" : "DEAD";
}

FailureDetectorOptions FailureDetectorOptions::from_config(const Config& config) {
  FailureDetectorOptions o;
  o.suspect_after_ms = config.node_suspect_after_ms;
  o.dead_after_ms = config.node_dead_after_ms;
  return o;
}

Status FailureDetectorOptions::validate() const {
  if (suspect_after_ms <= 0 || dead_after_ms <= suspect_after_ms) {
    return invalid_argument("failure detector: node_suspect_after_ms (" + std::to_string(suspect_after_ms) +
                            ") must be > 0 and below node_dead_after_ms (" + std::to_string(dead_after_ms) +
                            "); fix the settings (e.g. --set node_dead_after_ms=2000)");
  }
  return {};
}

namespace {

std::string seconds(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace

std::optional<NodeTransition> FailureDetector::evaluate(const gcs::NodeRecord& node, int64_t now_ms) const {
  if (node.state == NodeState::dead) return std::nullopt;
  const int64_t silence = std::max<int64_t>(0, now_ms - node.last_heartbeat_ms);
  NodeTransition t{node.id, node.state, node.state, ""};
  if (silence >= options_.dead_after_ms) {
    t.to = NodeState::dead;
    t.reason = "no heartbeat for " + seconds(silence) + " (timeout " + seconds(options_.dead_after_ms) + ")";
  } else if (silence >= options_.suspect_after_ms) {
    if (node.state == NodeState::suspect) return std::nullopt;
    t.to = NodeState::suspect;
    t.reason = "no heartbeat for " + seconds(silence) + " (suspect after " + seconds(options_.suspect_after_ms) + ")";
  } else {
    if (node.state == NodeState::alive) return std::nullopt;
    t.to = NodeState::alive;
    t.reason = "heartbeat resumed (last " + seconds(silence) + " ago)";
  }
  return t;
}

std::vector<NodeTransition> FailureDetector::evaluate(const std::vector<gcs::NodeRecord>& nodes,
                                                      int64_t now_ms) const {
  std::vector<NodeTransition> out;
  for (const auto& n : nodes) {
    if (auto t = evaluate(n, now_ms)) out.push_back(std::move(*t));
  }
  return out;
}

std::optional<NodeTransition> FailureDetector::connection_lost(const gcs::NodeRecord& node) const {
  if (node.state == NodeState::dead) return std::nullopt;
  return NodeTransition{node.id, node.state, NodeState::dead, "connection to node lost"};
}

std::optional<int64_t> FailureDetector::next_due_ms(const std::vector<gcs::NodeRecord>& nodes,
                                                    int64_t now_ms) const {
  std::optional<int64_t> next;
  for (const auto& n : nodes) {
    if (n.state == NodeState::dead) continue;
    for (int64_t after : {options_.suspect_after_ms, options_.dead_after_ms}) {
      const int64_t due = n.last_heartbeat_ms + after;
      if (due > now_ms && (!next || due < *next)) next = due;
    }
  }
  return next;
}

}  // namespace troupe::actors
