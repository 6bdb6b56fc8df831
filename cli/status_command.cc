// `troupe status [--json]`: the cluster from the GCS — nodes (state, resources used/total,
// heartbeat age), actors by state and node, jobs and recent events, and the dashboard's URL.
#include <algorithm>
#include <cstdio>

#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/tune_show.h"
#include "gcs/cluster_view.h"
#include "gcs/search_record.h"

namespace troupe::cli {
namespace {

// The searches after the cluster's tables: one line each, and the trial table of a running one.
void print_searches(gcs::Store& store) {
  auto searches = gcs::list_searches(store);
  if (!searches.ok() || searches->empty()) return;
  std::sort(searches->begin(), searches->end(), [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
  std::printf("\nSEARCHES (%zu)\n", searches->size());
  for (const gcs::SearchRecord& s : *searches) {
    if (gcs::search_finished(s.state)) std::printf("  %s\n", search_line(s).c_str());
    else print_search_table(stdout, s, 20);
  }
}

}  // namespace


Runner add_status_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("status", "Show the cluster: nodes, actors, jobs, recent events");
  auto json = std::make_shared<bool>(false);
  auto events = std::make_shared<size_t>(10);
  cmd->add_flag("--json", *json, "Print one JSON object (nodes[], actors[], jobs[], events[], summary, cluster)");
  cmd->add_option("--events", *events, "How many recent events to show")->check(CLI::Range(0, 10000))
      ->capture_default_str();
  return [json, events]() -> int {
    Session session = Session::current();
    auto info = session.read_cluster();
    if (!info.ok()) return report_error("status", info.status());
    auto store = connect_gcs(*info);
    if (!store.ok()) return report_error("status", store.status().with_context("reading the GCS"));
    gcs::ViewOptions vo;
    vo.events = *events;
    auto view = gcs::cluster_view(**store, vo);
    if (!view.ok()) return report_error("status", view.status());
    const std::string dashboard = dashboard_line(**store, "");  // no secret in status output
    (*view)["cluster"] = {{"head_address", info->head_address},
                          {"dashboard", dashboard},
                          {"gcs", info->redis_host + ":" + std::to_string(info->redis_port)},
                          {"embedded_redis", info->embedded_redis},
                          {"version", info->version},
                          {"started_ms", info->started_ms}};
    if (*json) {
      std::printf("%s\n", view->dump().c_str());
    } else {
      std::printf("cluster: head %s, GCS redis %s:%d, troupe %s\ndashboard: %s\n\n", info->head_address.c_str(),
                  info->redis_host.c_str(), info->redis_port, info->version.c_str(), dashboard.c_str());
      std::printf("%s", gcs::render_cluster_view(*view).c_str());
      print_searches(**store);
    }
    return 0;
  };
}

}  // namespace troupe::cli
