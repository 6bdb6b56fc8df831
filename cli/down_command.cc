// `troupe down`: ends the cluster's unfinished jobs (CANCELLED, to be continued with `troupe submit
// --resume JOB`), then stops every process this session started (nodes, then the head, then the
// embedded redis-server) and clears the session files; logs stay for `troupe logs`. Safe to run twice.
//
// Jobs are ended first so that a cluster brought up again on the same GCS does not take them over
// (a restarted head adopts unfinished jobs: that is for a head that died, not for a cluster shut
// down on purpose), and so that the nodes stopping do not make the supervisor restart them.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "core/process.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::cli {
namespace {

// Nodes first (they would otherwise report a lost head), then the head, then redis.
int stop_order(const std::string& role) {
  if (role == "redis") return 2;
  if (role == "head") return 1;
  return 0;
}

// Ends every unfinished job of the cluster: through the head's job supervisor when the head runs here
// (its actors are stopped, nothing restarts them), else in the GCS directly. Best effort: what fails
// is reported and `down` goes on stopping the processes.
void end_unfinished_jobs(const ClusterInfo& info, bool head_alive) {
  auto store = connect_gcs(info);
  if (!store.ok()) {
    std::fprintf(stderr, "troupe down: unfinished jobs are left as they are (GCS: %s)\n",
                 store.status().to_string().c_str());
    return;
  }
  auto jobs = gcs::Table<gcs::JobRecord>(**store).list();
  if (!jobs.ok()) {
    std::fprintf(stderr, "troupe down: listing jobs: %s\n", jobs.status().to_string().c_str());
    return;
  }
  for (const gcs::JobRecord& j : *jobs) {
    if (gcs::job_finished(j.state)) continue;
    const std::string why = "the cluster was shut down (troupe down); continue it with `troupe submit --resume " +
                            j.id.short_hex() + "`";
    Status st = head_alive ? request_job_stop(info, j.id, why, std::chrono::seconds(10)).status()
                           : gcs::update_job(**store, j.id, gcs::finish_job(gcs::JobState::cancelled, why)).status();
    if (st.ok()) std::printf("job %s cancelled; continue it with `troupe submit --resume %s`\n",
                             j.id.short_hex().c_str(), j.id.short_hex().c_str());
    else std::fprintf(stderr, "troupe down: ending job %s: %s\n", j.id.short_hex().c_str(), st.to_string().c_str());
  }
}

}  // namespace

Runner add_down_command(CLI::App& app, GlobalOptions&) {
  app.add_subcommand(
      "down", "Cancel the running jobs (continue them with submit --resume) and stop every process started here");
  return []() -> int {
    Session session = Session::current();
    std::vector<SessionProcess> procs = session.processes();
    bool head_alive = false, redis_alive = false;
    for (const SessionProcess& p : procs) {
      head_alive = head_alive || (p.role == "head" && p.alive);
      redis_alive = redis_alive || (p.role == "redis" && p.alive);
    }
    auto info = session.read_cluster();
    if (info.ok() && (head_alive || redis_alive || !info->embedded_redis)) end_unfinished_jobs(*info, head_alive);
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
