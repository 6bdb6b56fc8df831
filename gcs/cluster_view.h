// The cluster as one JSON document — nodes, actors, jobs and recent events read from the GCS — and
// its human rendering. `troupe status [--json]` prints it; the dashboard's /api serves the same
// document, so the two always agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "gcs/events.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::gcs {

struct ViewOptions {
  size_t events = 10;          // newest events to include
  size_t actors = SIZE_MAX;    // actor entries to include, the first in id order (the summary counts all)
  int64_t now_ms = 0;          // 0: the current time (tests pass a fixed one)
};

// {"nodes": [...], "actors": [...], "jobs": [...], "events": [...], "searches": [...], "summary": {...}}.
// Each node has id, state, address, hostname, pid, is_head, version, resources {total, used},
// gpus, heartbeat_age_ms, death_reason; each actor id, type, name, node, state, restarts,
// resources, pending_reason, death_reason, gpu_ids; each search is search_brief_json
// (gcs/search_record.h: one line, no trials); summary counts nodes and actors by state, jobs and searches.
Expected<nlohmann::json> cluster_view(Store& store, const ViewOptions& options = {});

// The entries of the document, one record each (the dashboard's /api serves them by themselves).
// `now_ms` is the clock heartbeat ages are measured against.
nlohmann::json node_json(const NodeRecord& node, int64_t now_ms);
nlohmann::json actor_json(const ActorRecord& actor);
nlohmann::json job_json(const JobRecord& job);
nlohmann::json event_json(const Event& event);
// The order of the document's nodes: heads first, then by start time, then by id.
bool node_display_order(const NodeRecord& a, const NodeRecord& b);

// A table per section for people: states, resources used/total, heartbeat ages, actors by state
// and node, pending actors with their reasons, live actors on GPUs with their devices ("gpu 0",
// "gpus 0,1"), jobs, and the recent events.
std::string render_cluster_view(const nlohmann::json& view);

}  // namespace troupe::gcs
