// JobSupervisor::adopt: a restarted head supervising the jobs its predecessor ran. See
// actors/job_supervisor.h; the head service gathers what it needs (actors/head_service.cc).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/job_supervisor.h"
#include "gcs/events.h"
#include "gcs/tables.h"

namespace troupe::actors {

void JobSupervisor::adopt(const SubmitJob& s, int attempt, const std::vector<AdoptedMember>& members) {
  auto id = JobId::from_hex(s.job_id);
  if (!id.ok() || jobs_.count(*id)) return;
  // What the earlier head was still placing is placed again here under new ids.
  retire_job_pending(*id, "the head placing it stopped; the restarted head places its job's actors again");
  Job job = make_job(*id, s);
  if (auto rec = gcs::Table<gcs::JobRecord>(*host_.store).get(id->hex()); rec.ok()) job.record = *rec;
  job.attempt = attempt;
  job.last_move_ms = gcs::now_ms();
  // An elastic gang may run on its first k slots; any other job runs every slot.
  const bool shrunk = job.elastic && !members.empty() && members.size() < job.actors.size();
  if (shrunk) job.size = job.ran_size = static_cast<int>(members.size());
  if (members.size() != job.actors.size() && !shrunk) {  // never placed (PENDING): placed like a new job
    for (size_t slot = 0; slot < job.actors.size(); ++slot) job.asks.push_back(make_ask(job, slot));
    jobs_.emplace(job.id, std::move(job));
    spdlog::info("job {}: pending again under the restarted head", id->short_hex());
    return;
  }
  int alive = 0;
  for (size_t slot = 0; slot < members.size(); ++slot) {
    const AdoptedMember& a = members[slot];
    Member m{a.id, a.node, job.actors[slot], a.handle, static_cast<bool>(a.handle), slot};
    if (m.running) {
      host_.monitor(m.handle);
      by_addr_[m.handle.address()] = job.id;
      ++alive;
    }
    job.members.push_back(std::move(m));
  }
  Job& j = jobs_.emplace(job.id, std::move(job)).first->second;
  job_event(*host_.store, "job_adopted", j.id,
            "job " + j.id.short_hex() + " is supervised again by the restarted head: " + std::to_string(alive) + " of " +
                std::to_string(j.members.size()) + " actors alive (attempt " + std::to_string(attempt) + ")");
  // Actors lost while no head watched failed then, together: one failure for the restart policy (a
  // gang restarts once; an async job replaces them all, servers first).
  Failed lost;
  std::string why;
  for (size_t slot = 0; slot < members.size(); ++slot) {
    if (members[slot].handle) continue;
    lost.push_back(&j.members[slot]);
    why += (why.empty() ? "" : "; ") + members[slot].lost_reason;
  }
  if (!lost.empty()) members_failed(j, lost, "lost while the head was down (" + why + ")");
  after_exit(j);  // may place the gang again at once, or forget the job (`j` is not used after)
}

}  // namespace troupe::actors
