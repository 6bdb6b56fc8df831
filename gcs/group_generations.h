// What the GCS keeps of a collective group beside its record (table "groups", written by rank 0):
//
//   group_members      "<group>/<generation>/<rank>"  each member's address, written by the member
//                                                      (collectives/group_rendezvous.h)
//   group_plans        "<group>/<generation>"         a manager's plan of a generation (group_plan.h)
//   group_generations  "<group>"                      the newest generation announced: by a member
//                                                      registering or a plan written
//
// The announcement makes "has the group moved on?" one read, which a live worker asks every 100 ms
// (trainers/job/live_recovery.h); it only grows (compare-and-set). A job's groups are named
// "job-<id>" and "job-<id>-<role>": forget_groups removes their members, plans and announcements
// once the job has ended (its record in "groups" stays for the dashboard).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr const char* kGroupMembersTable = "group_members";
constexpr const char* kGroupGenerationsTable = "group_generations";

// The generation in a key of `group`'s ("<group>/<generation>" or "<group>/<generation>/..."); -1
// for another group's key or one that does not read so.
int64_t generation_in_key(const std::string& key, const std::string& group);

// Records that `group` reached `generation`, unless a newer one is recorded already. The store's
// errors, named.
Status announce_generation(Store& store, const std::string& group, int64_t generation);

// The newest generation announced for `group` (-1: none); corrupt_data naming the key when the value
// is not a number.
Expected<int64_t> announced_generation(Store& store, const std::string& group);

// Removes the member keys and plans of `group`'s generations older than `generation`, best effort
// (rank 0 of a generation that formed: nobody goes back to them).
void remove_generations_before(Store& store, const std::string& group, int64_t generation);

// Removes the member keys, plans and announcement of group `name` and of every group "<name>-...",
// best effort (a job that ended: its groups will not form again).
void forget_groups(Store& store, const std::string& name);

}  // namespace troupe::gcs
