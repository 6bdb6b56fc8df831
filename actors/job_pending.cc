// The job supervisor's actors that wait for room (declared in actors/job_supervisor.h). A job's
// actor waiting to be placed has one PENDING record, whatever the number of placement retries:
// a gang's asks keep their ids until the gang is placed, a replacement its id until it is
// (Job::replacement_ids). An ask given up — superseded by a resized gang or by one asked again
// under new ids, or left waiting when its job ended — has its record ended as DEAD, "never placed:
// <why>", so no PENDING record outlives what it stands for.
#include <spdlog/spdlog.h>

#include "actors/job_supervisor.h"
#include "gcs/group_generations.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {

// `records` that are still PENDING, ended DEAD with `why`; best effort (logged).
void end_pending(gcs::Store& store, const std::vector<gcs::ActorRecord>& records, const std::string& why) {
  std::vector<gcs::ActorRecord> ended;
  const int64_t now = gcs::now_ms();
  for (gcs::ActorRecord r : records) {
    if (r.state != gcs::ActorState::pending) continue;  // placed meanwhile, or ended by its node
    r.state = gcs::ActorState::dead;
    r.death_reason = "never placed: " + why + (r.pending_reason.empty() ? "" : " (it waited: " + r.pending_reason + ")");
    r.pending_reason.clear();
    r.updated_ms = now;
    ended.push_back(std::move(r));
  }
  if (ended.empty()) return;
  Status st = gcs::Table<gcs::ActorRecord>(store).put_many(ended);
  if (!st.ok()) spdlog::warn("ending {} PENDING actor record(s) ({}): {}", ended.size(), why, st.to_string());
}

}  // namespace

void JobSupervisor::retire_unplaced(const std::vector<PlacementAsk>& asks, const std::string& why) {
  std::vector<std::string> keys;
  for (const PlacementAsk& a : asks) keys.push_back(a.id.hex());
  if (keys.empty()) return;
  auto records = gcs::Table<gcs::ActorRecord>(*host_.store).get_many(keys);  // absent: never recorded
  if (!records.ok()) {
    spdlog::warn("reading {} actor record(s) to end them ({}): {}", keys.size(), why, records.status().to_string());
    return;
  }
  end_pending(*host_.store, *records, why);
}

void JobSupervisor::retire_job_pending(const JobId& id, const std::string& why) {
  auto all = gcs::Table<gcs::ActorRecord>(*host_.store).list();
  if (!all.ok()) {
    spdlog::warn("job {}: listing actors to end its PENDING ones: {}", id.short_hex(), all.status().to_string());
    return;
  }
  std::vector<gcs::ActorRecord> mine;
  for (gcs::ActorRecord& r : *all)
    if (r.job == id && r.state == gcs::ActorState::pending) mine.push_back(std::move(r));
  end_pending(*host_.store, mine, why);
}

void JobSupervisor::forget_job(JobId id, const std::string& why) {
  jobs_.erase(id);
  retire_job_pending(id, why);
  gcs::forget_groups(*host_.store, "job-" + id.hex());  // its groups' members, plans and generations
}

PlacementAsk JobSupervisor::replacement_ask(Job& job, size_t slot) {
  auto kept = job.replacement_ids.find(slot);
  PlacementAsk ask = make_ask(job, slot, kept == job.replacement_ids.end() ? ActorId() : kept->second);
  job.replacement_ids[slot] = ask.id;
  return ask;
}

}  // namespace troupe::actors
