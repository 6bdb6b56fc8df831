// `troupe down`: stops every process this session started (nodes, then the head, then the embedded
// redis-server) and clears the session files; logs stay for `troupe logs`. Safe to run twice.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/session.h"
#include "core/process.h"

namespace troupe::cli {
namespace {

// Nodes first (they would otherwise report a lost head), then the head, then redis.
int stop_order(const std::string& role) {
  if (role == "redis") return 2;
  if (role == "head") return 1;
  return 0;
}

}  // namespace

Runner add_down_command(CLI::App& app, GlobalOptions&) {
  app.add_subcommand("down", "Stop every process of the cluster started here, redis included");
  return []() -> int {
    Session session = Session::current();
    std::vector<SessionProcess> procs = session.processes();
    std::stable_sort(procs.begin(), procs.end(),
                     [](const auto& a, const auto& b) { return stop_order(a.role) < stop_order(b.role); });
    int stopped = 0, failed = 0;
    for (const SessionProcess& p : procs) {
      if (!p.alive) continue;
      Status st = stop_process(p.pid, std::chrono::milliseconds(3000));
      if (st.ok()) {
        ++stopped;
        std::printf("stopped %s (pid %d)\n", p.role.c_str(), static_cast<int>(p.pid));
      } else {
        ++failed;
        std::fprintf(stderr, "troupe down: %s (pid %d): %s\n", p.role.c_str(), static_cast<int>(p.pid),
                     st.to_string().c_str());
      }
    }
    if (failed) return kExitFailure;
    Status st = session.clear();
    if (!st.ok()) return report_error("down", st);
    if (stopped == 0) std::printf("no cluster processes were running (session %s)\n", session.dir().c_str());
    else std::printf("cluster down: %d process%s stopped; logs kept in %s\n", stopped, stopped == 1 ? "" : "es",
                     session.log_dir().c_str());
    return 0;
  };
}

}  // namespace troupe::cli
