#include "gcs/group_generations.h"

#include <algorithm>
#include <vector>

#include "gcs/group_plan.h"

namespace troupe::gcs {
namespace {

// A generation written as decimal digits; -1 when `digits` does not read so.
int64_t parse_generation(const std::string& digits) {
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

Expected<int64_t> read_generation(const std::string& key, const std::optional<std::string>& value) {
  if (!value) return int64_t{-1};
  const int64_t g = parse_generation(*value);
  if (g < 0)
    return corrupt_data(std::string(kGroupGenerationsTable) + "/" + key + ": '" + *value + "' is not a generation");
  return g;
}

// Whether group `group` is `name` or one of its "<name>-..." groups.
bool of_groups(const std::string& group, const std::string& name) {
  if (group.compare(0, name.size(), name) != 0) return false;
  return group.size() == name.size() || group[name.size()] == '-';
}

// Removes the keys of `table` that `gone` picks, in one call (best effort).
template <class Pick>
void remove_keys(Store& store, const char* table, Pick gone) {
  auto keys = store.keys(table);
  if (!keys.ok()) return;
  std::vector<std::string> picked;
  for (const std::string& key : *keys)
    if (gone(key)) picked.push_back(key);
  if (!picked.empty()) (void)store.remove_many(table, picked);
}

}  // namespace

int64_t generation_in_key(const std::string& key, const std::string& group) {
  const size_t at = group.size() + 1;
  if (key.size() <= at || key.compare(0, group.size(), group) != 0 || key[group.size()] != '/') return -1;
  return parse_generation(key.substr(at, std::min(key.find('/', at), key.size()) - at));
}

Status announce_generation(Store& store, const std::string& group, int64_t generation) {
  const std::string what = "announcing generation " + std::to_string(generation) + " of group '" + group + "'";
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto value = store.get(kGroupGenerationsTable, group);
    if (!value.ok()) return value.status().with_context(what);
    auto known = read_generation(group, *value);
    if (!known.ok()) return known.status().with_context(what);
    if (*known >= generation) return {};
    auto set = *value ? store.compare_and_set(kGroupGenerationsTable, group, **value, std::to_string(generation))
                       : store.put_if_absent(kGroupGenerationsTable, group, std::to_string(generation));
    if (!set.ok()) return set.status().with_context(what);
    if (*set) return {};
  }
  return Status(Code::unavailable, what + ": the value kept changing under 100 tries");
}

Expected<int64_t> announced_generation(Store& store, const std::string& group) {
  auto value = store.get(kGroupGenerationsTable, group);
  if (!value.ok()) return value.status().with_context("reading the generation of group '" + group + "'");
  return read_generation(group, *value);
}

void remove_generations_before(Store& store, const std::string& group, int64_t generation) {
  for (const char* table : {kGroupMembersTable, kGroupPlansTable})
    remove_keys(store, table, [&](const std::string& key) {
      const int64_t g = generation_in_key(key, group);
      return g >= 0 && g < generation;
    });
}

void forget_groups(Store& store, const std::string& name) {
  // The group of a key: all of it (announcements), or up to its first '/' (members, plans).
  for (const char* table : {kGroupMembersTable, kGroupPlansTable, kGroupGenerationsTable})
    remove_keys(store, table, [&](const std::string& key) { return of_groups(key.substr(0, key.find('/')), name); });
}

}  // namespace troupe::gcs
