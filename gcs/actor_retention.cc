#include "gcs/actor_retention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gcs/records.h"
#include "gcs/tables.h"

namespace troupe::gcs {
namespace {
constexpr size_t kRemoveBatch = 1000;  // keys per HDEL
}  // namespace

Expected<size_t> prune_ended_actors(Store& store, size_t keep) {
  if (keep == 0) return size_t{0};
  Table<ActorRecord> table(store);
  auto keys = table.keys();
  if (!keys.ok()) return keys.status();
  if (keys->size() <= keep) return size_t{0};  // fewer records than the bound: nothing to read
  auto all = table.list();
  if (!all.ok()) return all.status();
  std::vector<const ActorRecord*> ended;
  for (const ActorRecord& a : *all)
    if (actor_ended(a.state)) ended.push_back(&a);
  if (ended.size() <= keep) return size_t{0};
  // Newest first; the ones past `keep` go.
  std::sort(ended.begin(), ended.end(), [](const ActorRecord* a, const ActorRecord* b) {
    return a->updated_ms != b->updated_ms ? a->updated_ms > b->updated_ms : b->id < a->id;
  });
  std::vector<std::string> gone;
  for (size_t i = keep; i < ended.size(); ++i) gone.push_back(ended[i]->id.hex());
  for (size_t from = 0; from < gone.size(); from += kRemoveBatch) {
    const size_t to = std::min(gone.size(), from + kRemoveBatch);
    TROUPE_RETURN_IF_ERROR(store.remove_many(TableName<ActorRecord>::value,
                                             std::vector<std::string>(gone.begin() + from, gone.begin() + to)));
  }
  return gone.size();
}

}  // namespace troupe::gcs
