// Exits the head saw without their reason. CAF tells a watcher the reason an actor ended with only
// when the watch reached the actor's node first; an actor that ended before (a job worker failing in
// its first milliseconds, while the head was still learning of it from the spawn's reply) comes down
// as exit_reason::unknown. Its node manager saw the real reason and writes it onto the actor's DEAD
// record (actors/actor_state_writer.h): the supervisor reads it from there, so the job fails with
// what the worker said, not with "unknown".
#include <spdlog/spdlog.h>

#include "actors/job_supervisor.h"
#include "actors/messages.h"
#include "gcs/tables.h"

namespace troupe::actors {

bool JobSupervisor::explain_exit(Job& job, Member& member, bool give_up) {
  auto rec = gcs::Table<gcs::ActorRecord>(*host_.store).get(member.id.hex());
  if (rec.ok() && gcs::actor_ended(rec->state) && !rec->death_reason.empty()) {
    const std::string& said = rec->death_reason;
    const bool failed = said != kExitedNormally;
    const size_t prefix = sizeof(kCrashedPrefix) - 1;
    const std::string why = said.compare(0, prefix, kCrashedPrefix) == 0 ? said.substr(prefix) : said;
    member_exited(job, member, failed, failed ? "exited: " + why : "");
    return true;
  }
  if (!give_up) return false;
  const std::string why = "exited before the head could watch it, and its node recorded no reason within " +
                          std::to_string(exit_reason_grace_.count()) + " ms" +
                          (rec.ok() ? "" : " (reading its record: " + rec.status().message() + ")") +
                          "; see `troupe logs " + job.id.short_hex() + "`";
  spdlog::warn("job {}: actor {} {}", job.id.short_hex(), member.id.short_hex(), why);
  member_exited(job, member, true, why);
  return true;
}

bool JobSupervisor::explain_exits() {
  const int64_t now = gcs::now_ms();
  std::vector<Unexplained> waiting;
  waiting.swap(unexplained_);
  for (const Unexplained& u : waiting) {
    auto it = jobs_.find(u.job);  // looked up each time: an explained exit may end a job
    if (it == jobs_.end()) continue;
    for (Member& m : it->second.members) {
      if (m.id != u.actor || !m.running) continue;  // its node died meanwhile: already counted
      if (!explain_exit(it->second, m, now >= u.give_up_ms)) unexplained_.push_back(u);
      break;
    }
  }
  return !unexplained_.empty();
}

}  // namespace troupe::actors
