// A node process's own resource use, which each node publishes to the GCS every few seconds so that
// the head's one scrape target (/metrics, dashboard/prometheus.h) serves every host's: its CPU time,
// resident memory, open descriptors and sockets, and threads.
//
//   table "node_stats", key: the node id (hex)
//   [kRecordSchemaVersion, node, time_ms, cpu_seconds, rss_bytes, open_fds, sockets, threads]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr const char* kNodeStatsTable = "node_stats";

struct NodeProcessStats {
  std::string node;        // hex id
  int64_t time_ms = 0;     // when measured (wall clock)
  double cpu_seconds = 0;  // user + system CPU time of the process since it started
  int64_t rss_bytes = 0;   // resident memory
  int64_t open_fds = 0;    // open file descriptors, sockets included
  int64_t sockets = 0;     // of those, sockets
  int64_t threads = 0;
};

// This process's figures now (from /proc/self); an error naming the file it could not read.
Expected<NodeProcessStats> measure_this_process(const std::string& node);

std::string encode_node_stats(const NodeProcessStats& s);
Status decode_node_stats(const std::string& bytes, NodeProcessStats* out);

Status put_node_stats(Store& store, const NodeProcessStats& s);
// Every node's newest figures; entries that do not decode are skipped and counted in *unreadable.
Expected<std::vector<NodeProcessStats>> list_node_stats(Store& store, int* unreadable = nullptr);

}  // namespace troupe::gcs
