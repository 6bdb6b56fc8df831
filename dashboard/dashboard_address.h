// Where the dashboard of a cluster listens, kept in the GCS so every CLI command can find it: the
// head writes it once its dashboard listens (and removes it when it stops or when the dashboard is
// off), `troupe up` and `troupe status` read it. Stored as JSON in table "cluster", key
// "dashboard": {"url": "http://127.0.0.1:40123", "token_required": false, "pid": 1234,
// "started_ms": ...}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::dashboard {

constexpr const char* kClusterTable = "cluster";
constexpr const char* kDashboardKey = "dashboard";

struct DashboardAddress {
  std::string url;              // http://host:port, without a trailing slash
  bool token_required = false;  // requests must carry the cluster token (dashboard/auth.h)
  int pid = 0;                  // the head process serving it
  int64_t started_ms = 0;
};

Status write_dashboard_address(gcs::Store& store, const DashboardAddress& address);
Status clear_dashboard_address(gcs::Store& store);
// nullopt when no dashboard is recorded (it is off, or the head has not started it yet);
// corrupt_data when the value is not the JSON above.
Expected<std::optional<DashboardAddress>> read_dashboard_address(gcs::Store& store);

// The URL to print for people: `url`, with "/?token=<token>" when a token is required.
std::string dashboard_link(const DashboardAddress& address, const std::string& token);

}  // namespace troupe::dashboard
