// `troupe timeline JOB [--steps N] [--summary]`: the job's step timeline (every sync, async or
// central worker's data wait, forward+backward, communication and optimizer per step, recorded by the runtime:
// gcs/step_timeline.h) as a Chrome trace on stdout — `troupe timeline JOB > trace.json`, then open
// it in Perfetto (ui.perfetto.dev) or chrome://tracing. --summary prints the per-worker means, the
// straggler and a stuck collective instead (the dashboard's job page shows the same). A pipeline
// job's stages record no step timelines: its trace holds the job's last recovery only.
#include <cstdio>

#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/job_follow.h"
#include "gcs/tables.h"
#include "gcs/timeline_view.h"

namespace troupe::cli {

Runner add_timeline_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("timeline", "Print a job's step timeline as a Chrome trace (JSON; opens in Perfetto)");
  auto id = std::make_shared<std::string>();
  auto steps = std::make_shared<int>(2000);
  auto summary = std::make_shared<bool>(false);
  cmd->add_option("job", *id, "The job's id (or its first hex digits, as troupe status prints them)")->required();
  cmd->add_option("--steps", *steps, "The newest steps per worker")
      ->check(CLI::Range(1, static_cast<int>(gcs::kTimelineMaxSteps)))->capture_default_str();
  cmd->add_flag("--summary", *summary, "Print the per-worker means, straggler and stuck collective as JSON instead");
  return [id, steps, summary]() -> int {
    auto info = Session::current().read_cluster();
    if (!info.ok()) return report_error("timeline", info.status());
    auto store = connect_gcs(*info);
    if (!store.ok()) return report_error("timeline", store.status());
    auto job_id = find_job(**store, *id);
    if (!job_id.ok()) return report_error("timeline", job_id.status());
    auto job = gcs::Table<gcs::JobRecord>(**store).get(job_id->hex());
    if (!job.ok()) return report_error("timeline", job.status());
    const bool stages = job->strategy == "pipeline";  // its stages record no step timelines
    if (stages && *summary) {
      return report_error("timeline", invalid_argument("job " + job_id->short_hex() + " is a " + job->strategy +
                                                       " job; step timelines are recorded for sync, async and "
                                                       "central jobs (its trace holds its recovery only)"));
    }
    auto workers = stages ? Expected<std::vector<gcs::WorkerTimeline>>(std::vector<gcs::WorkerTimeline>{})
                          : gcs::read_job_timeline(**store, *job, static_cast<size_t>(*steps));
    if (!workers.ok()) return report_error("timeline", workers.status());
    size_t recorded = 0;
    for (const auto& w : *workers) recorded += w.steps.size();
    if (*summary) {
      nlohmann::json j = gcs::timeline_json(*job, *workers, gcs::TimelineOptions{});
      for (auto& w : j["workers"]) w.erase("steps");
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    auto recovery = gcs::job_recovery(**store, *job_id);  // its last restart, drawn when readable
    std::printf("%s\n", gcs::chrome_trace(*job, *workers, recovery.ok() ? *recovery : std::nullopt).dump().c_str());
    if (stages)
      std::fprintf(stderr, "troupe timeline: job %s is a pipeline: its stages record no step timelines; the trace "
                           "holds the job's recovery only\n", job_id->short_hex().c_str());
    else
      std::fprintf(stderr, "troupe timeline: job %s: %zu steps of %zu workers%s\n", job_id->short_hex().c_str(),
                   recorded, workers->size(), recorded == 0 ? " (none recorded yet)" : "");
    return 0;
  };
}

}  // namespace troupe::cli
