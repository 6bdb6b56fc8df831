#include "dashboard/dashboard_address.h"

#include <nlohmann/json.hpp>

namespace troupe::dashboard {

Status write_dashboard_address(gcs::Store& store, const DashboardAddress& a) {
  const nlohmann::json j{{"url", a.url}, {"token_required", a.token_required}, {"pid", a.pid},
                         {"started_ms", a.started_ms}};
  return store.put(kClusterTable, kDashboardKey, j.dump());
}

Status clear_dashboard_address(gcs::Store& store) { return store.remove(kClusterTable, kDashboardKey); }

Expected<std::optional<DashboardAddress>> read_dashboard_address(gcs::Store& store) {
  auto bytes = store.get(kClusterTable, kDashboardKey);
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) return std::optional<DashboardAddress>();
  const Status bad = corrupt_data(std::string("GCS ") + kClusterTable + "/" + kDashboardKey +
                                  " is not the dashboard's address {\"url\": ...}; restart the cluster "
                                  "(troupe down; troupe up)");
  const nlohmann::json j = nlohmann::json::parse(**bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("url") || !j["url"].is_string()) return bad;
  try {
    DashboardAddress a;
    a.url = j["url"].get<std::string>();
    a.token_required = j.value("token_required", false);
    a.pid = j.value("pid", 0);
    a.started_ms = j.value("started_ms", int64_t{0});
    return std::optional<DashboardAddress>(a);
  } catch (const nlohmann::json::exception&) {
    return bad;  // a field of another type
  }
}

std::string dashboard_link(const DashboardAddress& a, const std::string& token) {
  return a.token_required && !token.empty() ? a.url + "/?token=" + token : a.url;
}

}  // namespace troupe::dashboard
