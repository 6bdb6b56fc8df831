// The job supervisor's elastic sync jobs (declared in actors/job_supervisor.h): a restart sized to
// the room there is, and the grow-back to full size once there is room again.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/job_supervisor.h"
#include "gcs/events.h"
#include "gcs/group_plan.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

namespace troupe::actors {
namespace {

// As job_restarts.cc's: how long a gang being stopped may take before the stragglers are left.
constexpr int64_t kGrowStopGraceMs = 1000;

// Probe asks for `slots` of `actors` (fresh ids: nothing is recorded by a dry run).
std::vector<PlacementAsk> probe_slots(const std::vector<JobActor>& actors, const std::vector<size_t>& slots) {
  std::vector<PlacementAsk> asks;
  for (size_t slot : slots) asks.push_back({ActorId::random(), actors[slot], std::nullopt, std::nullopt});
  return asks;
}

// Probe asks for slots [from, to) of `actors`.
std::vector<PlacementAsk> probe(const std::vector<JobActor>& actors, size_t from, size_t to) {
  std::vector<size_t> slots;
  for (size_t slot = from; slot < to && slot < actors.size(); ++slot) slots.push_back(slot);
  return probe_slots(actors, slots);
}

// "2 and 3": slots by number.
std::string slot_list(const std::vector<size_t>& slots) {
  std::string out;
  for (size_t i = 0; i < slots.size(); ++i)
    out += (i == 0 ? "" : i + 1 == slots.size() ? " and " : ", ") + std::to_string(slots[i]);
  return out;
}

// The step of the job's newest recorded checkpoint; -1 when it has none (or the GCS failed).
int64_t newest_checkpoint(gcs::Store& store, const JobId& job) {
  auto all = gcs::Table<gcs::CheckpointRecord>(store).list();
  if (!all.ok()) {
    spdlog::warn("job {}: listing checkpoints: {}", job.short_hex(), all.status().to_string());
    return -1;
  }
  int64_t step = -1;
  for (const gcs::CheckpointRecord& r : *all)
    if (r.job == job) step = std::max(step, r.step);
  return step;
}

}  // namespace

Status JobSupervisor::start_attempt(Job& job) {
  if (!job.elastic || job.attempt == 0 || !host_.fits) return try_start(job, nullptr);
  // The largest gang of the first k slots that fits now; none fits: ask for all (its PENDING reason
  // says what is missing) and look again at the next retry.
  const int all = static_cast<int>(job.actors.size());
  int k = all;
  while (k >= 1 && !host_.fits(probe(job.actors, 0, static_cast<size_t>(k)), job.policy)) --k;
  if (k < 1) k = all;
  if (k != job.size || static_cast<int>(job.asks.size()) != k) {
    job.size = k;
    retire_unplaced(job.asks, "its elastic job was resized to " + std::to_string(k) + " workers");
    job.asks.clear();
    for (size_t slot = 0; slot < static_cast<size_t>(k); ++slot) job.asks.push_back(make_ask(job, slot));
  }
  const JobId id = job.id;
  TROUPE_RETURN_IF_ERROR(try_start(job, nullptr));
  auto it = jobs_.find(id);  // try_start forgets a job cancelled meanwhile
  if (it == jobs_.end() || it->second.members.empty()) return {};
  Job& started = it->second;
  if (started.size != started.ran_size) {
    const std::string what =
        started.size < all ? "continues with " + std::to_string(started.size) + " of " + std::to_string(all) + " workers"
                           : "grows back to " + std::to_string(all) + " workers";
    job_event(*host_.store, "job_resized", id, "job " + id.short_hex() + " " + what + " (attempt " +
                                                   std::to_string(started.attempt) + ", from the newest checkpoint)");
    spdlog::info("job {} {}", id.short_hex(), what);
  }
  started.ran_size = started.size;
  started.grow_after_step = -1;
  return {};
}

void JobSupervisor::check_grow_back() {
  std::vector<std::pair<JobId, int64_t>> grow;
  std::vector<std::pair<JobId, std::vector<size_t>>> grow_live;
  for (auto& [id, job] : jobs_) {
    const size_t all = job.actors.size();
    if (job.elastic && job.live && host_.fits && !job.ending && !job.restarting && !job.members.empty() &&
        job.replace.empty() && static_cast<size_t>(job.size) < all) {
      std::vector<size_t> missing;
      for (size_t slot = 0; slot < all; ++slot) {
        bool runs = false;
        for (const Member& m : job.members) runs = runs || (m.slot == slot && m.running);
        if (!runs) missing.push_back(slot);
      }
      if (!missing.empty() && host_.fits(probe_slots(job.actors, missing), job.policy)) grow_live.emplace_back(id, missing);
      continue;
    }
    if (!job.elastic || job.live || !host_.fits || job.ending || job.restarting || job.members.empty() || !job.replace.empty() ||
        static_cast<size_t>(job.size) >= all)
      continue;
    if (!host_.fits(probe(job.actors, static_cast<size_t>(job.size), all), job.policy)) {
      job.grow_after_step = -1;  // the room went again
      continue;
    }
    const int64_t newest = newest_checkpoint(*host_.store, id);
    if (job.grow_after_step < 0) {
      // Room now: wait for the next checkpoint, so the restart loses almost no steps.
      job.grow_after_step = std::max<int64_t>(newest, 0);
      spdlog::info("job {}: room for all {} workers again; growing back after the next checkpoint (newest: step {})",
                   id.short_hex(), all, newest);
      continue;
    }
    if (newest > job.grow_after_step) grow.emplace_back(id, newest);
  }
  for (const auto& [id, step] : grow) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) grow_back(it->second, step);
  }
  for (const auto& [id, missing] : grow_live) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) grow_back_live(it->second, missing);
  }
}

void JobSupervisor::grow_back(Job& job, int64_t checkpoint_step) {
  ++job.attempt;
  ++job.free_attempts;  // not a failure: the budget stays
  job.restarting = true;
  job.restart_due_ms = gcs::now_ms();
  job.stop_grace_ms = gcs::now_ms() + kGrowStopGraceMs;
  job.grow_after_step = -1;
  const std::string why = "job " + job.id.short_hex() + " grows back to " + std::to_string(job.actors.size()) +
                          " workers: there is room again; its " + std::to_string(job.size) +
                          " workers restart from the checkpoint of step " + std::to_string(checkpoint_step);
  job_event(*host_.store, "job_resizing", job.id, why);
  spdlog::info("{}", why);
  auto rec = gcs::update_job(*host_.store, job.id, [&](gcs::JobRecord& j) -> Status {
    if (gcs::job_finished(j.state)) return invalid_argument("ended");
    j.message = "growing back to " + std::to_string(job.actors.size()) + " workers";
    return {};
  });
  (void)rec;
  stop_members(job, why, false);
}

void JobSupervisor::plan_live_generation(Job& job) {
  if (job.planned_attempt == job.attempt) return;
  job.planned_attempt = job.attempt;
  const int all = static_cast<int>(job.actors.size());
  // The most of the waiting slots that fit now, in their order; the rest are dropped.
  size_t fit = job.replace.size();
  while (fit > 0 && host_.fits &&
         !host_.fits(probe_slots(job.actors, {job.replace.begin(), job.replace.begin() + static_cast<long>(fit)}),
                     job.policy))
    --fit;
  const std::vector<size_t> dropped(job.replace.begin() + static_cast<long>(fit), job.replace.end());
  job.replace.resize(fit);
  std::vector<PlacementAsk> unplaced;
  for (size_t slot : dropped) {
    if (auto kept = job.replacement_ids.find(slot); kept != job.replacement_ids.end()) {
      unplaced.push_back(make_ask(job, slot, kept->second));
      job.replacement_ids.erase(kept);
    }
    job.pins.erase(slot);
    job.avoids.erase(slot);
  }
  retire_unplaced(unplaced, "its elastic job goes on without it (no room)");
  std::vector<int> slots;
  for (const Member& m : job.members)
    if (m.running && !is_server_actor(m.actor)) slots.push_back(static_cast<int>(m.slot));
  for (size_t slot : job.replace) slots.push_back(static_cast<int>(slot));
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  if (slots.empty()) return;  // nobody left and no room: the worker's wait ends it (check_progress)
  const int before = job.ran_size;
  job.size = static_cast<int>(slots.size());
  job.ran_size = job.size;
  Status st = gcs::put_group_plan(*host_.store, "job-" + job.id.hex(), job.attempt, slots);
  if (!st.ok()) spdlog::warn("job {}: {}", job.id.short_hex(), st.to_string());
  if (job.size == before) return;
  const std::string what =
      job.size < before
          ? "continues with " + std::to_string(job.size) + " of " + std::to_string(all) + " workers (no room for slot" +
                (dropped.size() == 1 ? " " : "s ") + slot_list(dropped) + "), from the survivors' memory"
          : "grows back to " + std::to_string(job.size) + " of " + std::to_string(all) +
                " workers; the newcomers take the state from a survivor's memory";
  job_event(*host_.store, "job_resized", job.id,
            "job " + job.id.short_hex() + " " + what + " (generation " + std::to_string(job.attempt) + ")");
  spdlog::info("job {} {}", job.id.short_hex(), what);
}

void JobSupervisor::grow_back_live(Job& job, const std::vector<size_t>& missing) {
  ++job.attempt;
  ++job.free_attempts;  // not a failure: the budget stays
  job.replace = missing;
  job.restart_due_ms = gcs::now_ms();
  const std::string why = "job " + job.id.short_hex() + " grows back to " + std::to_string(job.actors.size()) +
                          " workers: there is room again for slot" + (missing.size() == 1 ? " " : "s ") +
                          slot_list(missing) + "; the " + std::to_string(job.size) + " running go on from memory";
  job_event(*host_.store, "job_resizing", job.id, why);
  spdlog::info("{}", why);
}

}  // namespace troupe::actors
