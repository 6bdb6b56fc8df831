// `troupe stop JOB`: cancels a job (its actors are stopped, the job recorded CANCELLED) through the
// head's job supervisor.
#include <cstdio>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "actors/head_messages.h"
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
    auto hp = actors::parse_host_port(info->head_address);
    if (!hp.ok()) return report_error("stop", hp.status());
    auto sys = actors::ActorSystem::start(actors::ActorSystemOptions{});
    if (!sys.ok()) return report_error("stop", sys.status());
    auto head = (*sys)->connect(hp->first, hp->second);
    if (!head.ok()) return report_error("stop", head.status().with_context("reaching the head"));
    auto reply = actors::request_blocking<actors::StopJobReply>(
        (*sys)->system(), *head, std::chrono::seconds(30), actors::StopJob{job->hex(), "stopped by troupe stop"},
        "stopping job " + job->short_hex());
    if (!reply.ok()) return report_error("stop", reply.status());
    std::printf("job %s: %s (%d actors stopped)\n", job->short_hex().c_str(), reply->state.c_str(), reply->stopped);
    return 0;
  };
}

}  // namespace troupe::cli
