// Cluster events and metrics as bounded GCS streams: what happened (node joined or died, actor
// started, crashed or restarted, job progress, checkpoint written) with when and to whom, for
// `troupe status`, the dashboard's timeline and tests. Metrics are numeric samples on their own
// stream. Both streams keep about kEventStreamLength newest entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr size_t kEventStreamLength = 10000;
constexpr const char* kEventStream = "events";
constexpr const char* kMetricStream = "metrics";

struct Event {
  int64_t time_ms = 0;    // wall clock, ms since the epoch (0: filled in by record_event)
  std::string kind;       // node_joined, node_suspect, node_died, actor_started, actor_crashed,
                          // actor_restarted, actor_died, job_progress, ...
  std::string subject;    // the node, actor or job id (hex) it is about
  std::string message;    // one human-readable line
};

struct Metric {
  int64_t time_ms = 0;
  std::string name;       // "job/<id>/loss", "node/<id>/cpu_used", ...
  double value = 0;
};

// Encoded as [kRecordSchemaVersion, fields...] like the records of gcs/records.h; decode refuses
// another version (version_mismatch) and malformed bytes (corrupt_data), never throwing, and leaves
// `*out` unchanged on error.
std::string encode_event(const Event& e);
Status decode_event(const std::string& bytes, Event* out);
std::string encode_metric(const Metric& m);
Status decode_metric(const std::string& bytes, Metric* out);

// Appends to the events stream and publishes the encoded event (decode_event reads it) on the
// "events" channel.
Status record_event(Store& store, Event event);
// The newest `count` events, oldest first; an entry that does not decode fails the call naming it.
Expected<std::vector<Event>> recent_events(Store& store, size_t count);

Status record_metric(Store& store, Metric metric);
Expected<std::vector<Metric>> recent_metrics(Store& store, size_t count);

// Wall clock in ms since the epoch (the unit of every *_ms field of the GCS).
int64_t now_ms();

}  // namespace troupe::gcs
