// `troupe stop JOB`: cancels a job (its actors are stopped, the job recorded CANCELLED) through the
// head's job supervisor.
#include <cstdio>

#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/job_follow.h"

namespace troupe::cli {

Runner add_stop_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("stop", "Stop a job: its actors end, the job is CANCELLED");
  auto id = std::make_shared<std::string>();
  cmd->add_option("job", *id, "The job's id (or its first hex digits, as troupe status prints them)")->required();
  return [id]() -> int {
    auto info = Session::current().read_cluster();
    if (!info.ok()) return report_error("stop", info.status());
    auto store = connect_gcs(*info);
    if (!store.ok()) return report_error("stop", store.status());
    auto job = find_job(**store, *id);
    if (!job.ok()) return report_error("stop", job.status());
    auto reply = request_job_stop(*info, *job, "stopped by troupe stop", std::chrono::seconds(30));
    if (!reply.ok()) return report_error("stop", reply.status());
    std::printf("job %s: %s (%d actors stopped)\n", job->short_hex().c_str(), reply->state.c_str(), reply->stopped);
    return 0;
  };
}

}  // namespace troupe::cli
