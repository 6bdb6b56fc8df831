#include "trainers/job/ps_applied.h"

#include <thread>

#include "gcs/async_accounting.h"
#include "gcs/events.h"  // now_ms

namespace troupe::job {

Status publish_applied(gcs::Store& store, const JobId& job, int index, int attempt, const ps::ParameterShard& shard) {
  gcs::PsAppliedRecord r;
  r.job = job;
  r.server = index;
  r.attempt = attempt;
  r.restored_step = shard.restored_step();
  r.restored_record = shard.restored_record();
  r.replayed = shard.replayed();
  for (const ps::AppliedShard& s : shard.applied())
    r.shards.push_back(gcs::AppliedCount{s.epoch, s.shard, s.applied, s.duplicates, s.gaps});
  r.recorded_ms = gcs::now_ms();
  return gcs::Table<gcs::PsAppliedRecord>(store).put(r).with_context(
      "parameter server " + std::to_string(index) + " writing its applied data for the job's accounting");
}

Status wait_for_applied(gcs::Store& store, const JobId& job, int servers, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  gcs::Table<gcs::PsAppliedRecord> table(store);
  int next = 0;  // servers below it have written theirs
  while (true) {
    while (next < servers) {
      auto r = table.get(job.hex() + "/" + std::to_string(next));
      if (!r.ok() && r.status().code() != Code::not_found) return r.status();
      if (!r.ok()) break;
      ++next;
    }
    if (next == servers) return {};
    if (std::chrono::steady_clock::now() >= deadline)
      return Status(Code::timeout, "parameter server " + std::to_string(next) + " did not write its applied data " +
                                       "within " + std::to_string(timeout.count()) + " ms of every worker finishing " +
                                       "(see its node's log); the job's data accounting will report it");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace troupe::job
