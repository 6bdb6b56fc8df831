#include "trainers/ps/push_history.h"

#include <algorithm>

namespace troupe::ps {

void PushHistory::add(int worker, int64_t clock, const DataTag& tag) {
  if (keep_ == 0 || worker < 0 || static_cast<size_t>(worker) >= ranks_.size()) return;
  Rank& r = ranks_[static_cast<size_t>(worker)];
  if (clock <= r.dropped_up_to) return;
  auto at = std::lower_bound(r.pushes.begin(), r.pushes.end(), clock,
                             [](const TaggedPush& p, int64_t c) { return p.clock < c; });
  if (at != r.pushes.end() && at->clock == clock) at->tag = tag;  // the same push again: one entry
  else r.pushes.insert(at, TaggedPush{clock, tag});
  while (r.pushes.size() > keep_) {
    r.dropped_up_to = r.pushes.front().clock;
    r.pushes.pop_front();
  }
}

PushesAfter PushHistory::after(int worker, int64_t after) const {
  PushesAfter out;
  if (worker < 0 || static_cast<size_t>(worker) >= ranks_.size()) return out;
  const Rank& r = ranks_[static_cast<size_t>(worker)];
  out.complete = keep_ > 0 && r.dropped_up_to <= after;
  for (const TaggedPush& p : r.pushes)
    if (p.clock > after) out.pushes.push_back(p);
  return out;
}

void PushHistory::known_from(int worker, int64_t clock) {
  if (worker < 0 || static_cast<size_t>(worker) >= ranks_.size()) return;
  Rank& r = ranks_[static_cast<size_t>(worker)];
  r.pushes.clear();
  r.dropped_up_to = clock;
}

}  // namespace troupe::ps
