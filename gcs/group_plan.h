// A collective group's generation announced ahead by whoever manages the group: which members
// (named by stable numbers, a job's slots) take its ranks, in rank order. An elastic live job's
// supervisor writes one when the job shrinks (a lost worker with no room for a replacement: the
// survivors re-form without it, nobody new registers) or grows back (the newcomers and the
// survivors at their new ranks); its workers read their rank and the group's size from it
// (trainers/job/live_recovery.h). A generation with no plan is ranks = slots.
//
// Table "group_plans", key "<group>/<generation>", value the slots as decimal numbers separated by
// spaces ("0 2 3"). A plan announces its generation (group_generations.h), so the survivors' waits
// and watches see a shrink as they see a replacement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr const char* kGroupPlansTable = "group_plans";

// Plans and announces generation `generation` of group `group`: `slots` (distinct, >= 0) take ranks
// 0..n-1 in this order. invalid_argument for an empty, negative or repeated slot.
Status put_group_plan(Store& store, const std::string& group, int64_t generation, const std::vector<int>& slots);
// The plan of that generation; nullopt when none was announced; corrupt_data naming the key when
// the value does not read as slots.
Expected<std::optional<std::vector<int>>> group_plan(Store& store, const std::string& group, int64_t generation);

// Worker `slot`'s rank in `plan` (-1: not in it).
int rank_in_plan(const std::vector<int>& plan, int slot);

}  // namespace troupe::gcs
