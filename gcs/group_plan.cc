#include "gcs/group_plan.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "gcs/group_generations.h"

namespace troupe::gcs {
namespace {

std::string plan_key(const std::string& group, int64_t generation) {
  return group + "/" + std::to_string(generation);
}

}  // namespace

Status put_group_plan(Store& store, const std::string& group, int64_t generation, const std::vector<int>& slots) {
  if (slots.empty()) return invalid_argument("a plan of group '" + group + "' needs at least one member");
  std::set<int> seen;
  std::string value;
  for (int s : slots) {
    if (s < 0 || !seen.insert(s).second)
      return invalid_argument("group '" + group + "' generation " + std::to_string(generation) + ": slot " +
                              std::to_string(s) + " is negative or named twice");
    value += (value.empty() ? "" : " ") + std::to_string(s);
  }
  TROUPE_RETURN_IF_ERROR(store.put(kGroupPlansTable, plan_key(group, generation), value)
                             .with_context("planning generation " + std::to_string(generation) + " of group '" +
                                           group + "'"));
  return announce_generation(store, group, generation);
}

Expected<std::optional<std::vector<int>>> group_plan(Store& store, const std::string& group, int64_t generation) {
  const std::string key = plan_key(group, generation);
  auto value = store.get(kGroupPlansTable, key);
  if (!value.ok()) return value.status().with_context(std::string(kGroupPlansTable) + "/" + key);
  if (!value->has_value()) return std::optional<std::vector<int>>();
  std::istringstream in(**value);
  std::vector<int> slots;
  std::string word;
  while (in >> word) {
    if (word.find_first_not_of("0123456789") != std::string::npos || word.size() > 7)
      return corrupt_data(std::string(kGroupPlansTable) + "/" + key + ": '" + **value +
                          "' is not slots separated by spaces");
    slots.push_back(std::stoi(word));
  }
  if (slots.empty()) return corrupt_data(std::string(kGroupPlansTable) + "/" + key + " names no slot");
  return std::optional<std::vector<int>>(std::move(slots));
}

int rank_in_plan(const std::vector<int>& plan, int slot) {
  auto it = std::find(plan.begin(), plan.end(), slot);
  return it == plan.end() ? -1 : static_cast<int>(it - plan.begin());
}

}  // namespace troupe::gcs
