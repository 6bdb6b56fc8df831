// `troupe stop ID`: cancels a job (its actors are stopped, the job recorded CANCELLED) through the
// head's job supervisor, or stops one actor started with `troupe spawn` (its node records it DEAD
// and the head gives its resources back).
#include <cstdio>

#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/job_follow.h"

namespace troupe::cli {

Runner add_stop_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("stop", "Stop a job (its actors end, the job is CANCELLED) or a spawned actor");
  auto id = std::make_shared<std::string>();
  cmd->add_option("id", *id, "A job's or an actor's id (or its first hex digits, as troupe status prints them)")
      ->required();
  return [id]() -> int {
    auto info = Session::current().read_cluster();
    if (!info.ok()) return report_error("stop", info.status());
    auto store = connect_gcs(*info);
    if (!store.ok()) return report_error("stop", store.status());
    auto job = find_job(**store, *id);
    if (!job.ok() && job.status().code() == Code::not_found) {
      auto actor = find_actor(**store, *id);
      if (!actor.ok()) return report_error("stop", actor.status());
      auto stopped = request_actor_stop(*info, *actor, "stopped by troupe stop", std::chrono::seconds(30));
      if (!stopped.ok()) return report_error("stop", stopped.status());
      if (stopped->node_id.empty())
        std::printf("actor %s: stopped before it was placed\n", actor->short_hex().c_str());
      else
        std::printf("actor %s on node %s: stopping\n", actor->short_hex().c_str(), stopped->node_id.substr(0, 8).c_str());
      return 0;
    }
    if (!job.ok()) return report_error("stop", job.status());
    auto reply = request_job_stop(*info, *job, "stopped by troupe stop", std::chrono::seconds(30));
    if (!reply.ok()) return report_error("stop", reply.status());
    std::printf("job %s: %s (%d actors stopped)\n", job->short_hex().c_str(), reply->state.c_str(), reply->stopped);
    return 0;
  };
}

}  // namespace troupe::cli
