#include "data/shards/shard_ledger.h"

#include <algorithm>
#include <tuple>

#include "gcs/events.h"  // now_ms
#include "gcs/tables.h"  // TableName

namespace troupe::data {
namespace {

using Clock = std::chrono::steady_clock;
using gcs::ShardRecord;
using gcs::ShardState;

const char* table() { return gcs::TableName<ShardRecord>::value; }

// "held by worker 1a2b3c4d" / "UNASSIGNED" / "DONE by worker ...": a shard's state for messages.
std::string describe_state(const ShardRecord& r) {
  std::string s = gcs::shard_state_name(r.state);
  if (!r.owner.nil()) s += " (worker " + r.owner.short_hex() + ")";
  return s;
}

}  // namespace

ShardLedger::ShardLedger(gcs::Store& store, JobId job, ShardLedgerOptions options)
    : store_(store), job_(job), options_(options) {}

std::string ShardLedger::key(int epoch, int shard) const {
  ShardRecord r;
  r.job = job_;
  r.epoch = epoch;
  r.shard = shard;
  return gcs::record_key(r);
}

std::string ShardLedger::where(int epoch, int shard) const {
  return "shard " + std::to_string(shard) + " of epoch " + std::to_string(epoch) + " of job " + job_.short_hex();
}

Expected<std::optional<ShardLedger::Read>> ShardLedger::read(int epoch, int shard) {
  const std::string k = key(epoch, shard);
  auto bytes = store_.get(table(), k);
  if (!bytes.ok()) return bytes.status().with_context("reading " + where(epoch, shard));
  if (!bytes->has_value()) return std::optional<Read>{};
  Read r;
  Status st = gcs::decode(**bytes, &r.record);
  if (!st.ok()) return st.with_context(std::string(table()) + "/" + k);
  r.bytes = std::move(**bytes);
  return std::optional<Read>(std::move(r));
}

Expected<bool> ShardLedger::swap(const Read& current, ShardRecord& next) {
  next.updated_ms = gcs::now_ms();
  const std::string k = gcs::record_key(next), desired = gcs::encode(next);
  auto swapped = store_.compare_and_set(table(), k, current.bytes, desired);
  if (!swapped.ok() && swapped.status().code() == Code::unavailable) {
    // The connection dropped with the script in flight: it may have run. Our bytes are unique (they
    // carry the time), so finding them means it did; then the write is ours, not lost.
    auto now = store_.get(table(), k);
    if (now.ok() && now->has_value() && **now == desired) swapped = true;
  }
  if (!swapped.ok()) return swapped.status().with_context("writing " + where(next.epoch, next.shard));
  if (*swapped) {
    // A lost notification only delays watchers that also poll; the record itself is written.
    (void)store_.publish(table(), k);
  }
  return swapped;
}

template <class Edit>
Status ShardLedger::modify(int epoch, int shard, Edit&& edit, ShardRecord* written) {
  const auto deadline = Clock::now() + options_.timeout;
  int lost = 0;
  while (true) {
    auto current = read(epoch, shard);
    if (!current.ok()) return current.status();
    if (!current->has_value()) {
      return not_found(where(epoch, shard) + " is not in the GCS: the job supervisor has not created epoch " +
                       std::to_string(epoch) + " (ShardLedger::create_epoch)");
    }
    ShardRecord next = (*current)->record;
    auto changed = edit(next);
    if (!changed.ok()) return changed.status();
    if (!*changed) return {};
    auto swapped = swap(**current, next);
    if (!swapped.ok()) return swapped.status();
    if (*swapped) {
      if (written) *written = next;
      return {};
    }
    if (++lost, Clock::now() >= deadline) {
      return Status(Code::timeout, where(epoch, shard) + ": lost " + std::to_string(lost) +
                                       " races to other writers in " + std::to_string(options_.timeout.count()) +
                                       " ms; is something rewriting the shards table in a loop?");
    }
  }
}

Status ShardLedger::create_epoch(int epoch, const std::vector<int64_t>& sizes) {
  return create_resumed_epoch(epoch, sizes, std::vector<int64_t>(sizes.size(), 0));
}

Status ShardLedger::create_resumed_epoch(int epoch, const std::vector<int64_t>& sizes,
                                         const std::vector<int64_t>& trained) {
  if (static_cast<int>(sizes.size()) != options_.shards) {
    return invalid_argument("epoch " + std::to_string(epoch) + " of job " + job_.short_hex() + ": " +
                            std::to_string(sizes.size()) + " shard sizes for a ledger of " +
                            std::to_string(options_.shards) + " shards per epoch");
  }
  for (size_t s = 0; s < sizes.size(); ++s) {
    if (sizes[s] < 0) {
      return invalid_argument(where(epoch, static_cast<int>(s)) + ": negative size " + std::to_string(sizes[s]));
    }
    if (s >= trained.size() || trained[s] < 0 || trained[s] > sizes[s]) {
      return invalid_argument(where(epoch, static_cast<int>(s)) + ": " +
                              (s < trained.size() ? std::to_string(trained[s]) : std::string("no count of")) +
                              " examples trained of " + std::to_string(sizes[s]));
    }
  }
  const int64_t now = gcs::now_ms();
  for (int s = 0; s < options_.shards; ++s) {
    ShardRecord r;
    r.job = job_;
    r.epoch = epoch;
    r.shard = s;
    r.examples = sizes[static_cast<size_t>(s)];
    r.updated_ms = now;
    const int64_t done = trained[static_cast<size_t>(s)];
    if (done > 0 && done == r.examples) {
      r.state = gcs::ShardState::done;
      r.progress = done;
    } else {
      r.resume_at = done;
      r.progress = done;
    }
    auto stored = store_.put_if_absent(table(), gcs::record_key(r), gcs::encode(r));
    if (!stored.ok()) return stored.status().with_context("creating " + where(epoch, s));
    if (*stored) (void)store_.publish(table(), gcs::record_key(r));
  }
  return {};
}

Expected<std::optional<ShardRecord>> ShardLedger::claim(int epoch, WorkerId worker) {
  if (worker.nil()) return invalid_argument("claiming a shard of epoch " + std::to_string(epoch) + ": nil worker id");
  const auto deadline = Clock::now() + options_.timeout;
  bool any = false;
  for (int s = 0; s < options_.shards; ++s) {
    // Lowest shard first, so a job's shards are taken in plan order. A lost race on this shard
    // means someone else took it (or released it again): read it once more before moving on.
    while (true) {
      auto current = read(epoch, s);
      if (!current.ok()) return current.status();
      if (!current->has_value()) break;
      any = true;
      if ((*current)->record.state != ShardState::unassigned) break;
      ShardRecord next = (*current)->record;
      next.state = ShardState::assigned;
      next.owner = worker;
      next.progress = next.resume_at;
      ++next.claims;
      auto swapped = swap(**current, next);
      if (!swapped.ok()) return swapped.status();
      if (*swapped) return std::optional<ShardRecord>(next);
      if (Clock::now() >= deadline) {
        return Status(Code::timeout, "claiming a shard of epoch " + std::to_string(epoch) + " of job " +
                                         job_.short_hex() + ": lost every race for " +
                                         std::to_string(options_.timeout.count()) + " ms");
      }
    }
  }
  if (!any) {
    return not_found("epoch " + std::to_string(epoch) + " of job " + job_.short_hex() +
                     " has no shards in the GCS: the job supervisor has not created it (ShardLedger::create_epoch)");
  }
  return std::optional<ShardRecord>{};
}

Expected<std::optional<ShardRecord>> ShardLedger::claim_shard(int epoch, int shard, WorkerId worker) {
  if (worker.nil()) return invalid_argument("claiming " + where(epoch, shard) + ": nil worker id");
  if (shard < 0 || shard >= options_.shards)
    return not_found(where(epoch, shard) + " does not exist: the job has " + std::to_string(options_.shards) +
                     " shards per epoch");
  bool done = false;
  ShardRecord claimed;
  TROUPE_RETURN_IF_ERROR(modify(epoch, shard, [&](ShardRecord& r) -> Expected<bool> {
    done = r.state == ShardState::done;
    if (done) return false;
    r.state = ShardState::assigned;
    r.owner = worker;
    r.progress = r.resume_at;
    ++r.claims;
    return true;
  }, &claimed));
  if (done) return std::optional<ShardRecord>{};
  return std::optional<ShardRecord>(claimed);
}

Status ShardLedger::report_progress(int epoch, int shard, WorkerId worker, int64_t examples_done) {
  return modify(epoch, shard, [&](ShardRecord& r) -> Expected<bool> {
    if (r.owner != worker || r.state == ShardState::unassigned) {
      return not_found("worker " + worker.short_hex() + " does not hold " + where(epoch, shard) + " (it is " +
                       describe_state(r) + "): it was released or never claimed; drop it and claim another");
    }
    if (examples_done < 0 || examples_done > r.examples) {
      return invalid_argument(where(epoch, shard) + ": progress " + std::to_string(examples_done) +
                              " is outside [0, " + std::to_string(r.examples) + "]");
    }
    if (r.state == ShardState::done || r.progress == examples_done) return false;
    r.progress = examples_done;
    return true;
  });
}

Status ShardLedger::complete(int epoch, int shard, WorkerId worker) {
  return modify(epoch, shard, [&](ShardRecord& r) -> Expected<bool> {
    if (r.owner != worker || r.state == ShardState::unassigned) {
      return not_found("worker " + worker.short_hex() + " cannot complete " + where(epoch, shard) + " (it is " +
                       describe_state(r) + "): it was released or never claimed; its examples will be " +
                       "trained by the shard's next owner");
    }
    if (r.state == ShardState::done) return false;
    r.state = ShardState::done;
    r.progress = r.examples;
    return true;
  });
}

Expected<bool> ShardLedger::reopen(int epoch, int shard, WorkerId owner, int64_t at) {
  bool changed = false;
  TROUPE_RETURN_IF_ERROR(modify(epoch, shard, [&](ShardRecord& r) -> Expected<bool> {
    if (r.state != ShardState::done || r.owner != owner) return changed = false;
    if (at < 0 || at >= r.examples)
      return invalid_argument("reopening " + where(epoch, shard) + " at example " + std::to_string(at) + " of " +
                              std::to_string(r.examples));
    r.state = ShardState::unassigned;
    r.owner = WorkerId();
    r.resume_at = at;
    return changed = true;
  }));
  return changed;
}

Expected<std::vector<ShardRecord>> ShardLedger::release_worker(WorkerId worker, const ResumeAt& resume_at) {
  auto rows = store_.get_all(table());
  if (!rows.ok()) return rows.status().with_context("releasing the shards of worker " + worker.short_hex());
  const std::string prefix = job_.hex() + "/";
  std::vector<ShardRecord> released;
  for (const auto& [k, bytes] : *rows) {
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    ShardRecord r;
    Status st = gcs::decode(bytes, &r);
    if (!st.ok()) return st.with_context(std::string(table()) + "/" + k);
    if (r.state != ShardState::assigned || r.owner != worker) continue;
    bool ours = true;
    TROUPE_RETURN_IF_ERROR(modify(r.epoch, r.shard, [&](ShardRecord& now) -> Expected<bool> {
      // It may have been completed (or, impossibly for a dead worker, re-claimed) since the scan.
      if (now.state != ShardState::assigned || now.owner != worker) return ours = false;
      const int64_t at = resume_at ? resume_at(now) : 0;
      if (at < 0 || at > now.examples)
        return invalid_argument(where(now.epoch, now.shard) + ": resuming at example " + std::to_string(at) +
                                " of " + std::to_string(now.examples) + "; the offset must be within the shard");
      now.state = ShardState::unassigned;
      now.owner = WorkerId();
      now.resume_at = at;
      return true;
    }));
    if (!ours) continue;
    auto now = read(r.epoch, r.shard);
    if (!now.ok()) return now.status();
    if (now->has_value()) released.push_back((*now)->record);
  }
  std::sort(released.begin(), released.end(),
            [](const ShardRecord& a, const ShardRecord& b) { return std::tie(a.epoch, a.shard) < std::tie(b.epoch, b.shard); });
  return released;
}

Expected<int> ShardLedger::rewind(int from_epoch) {
  auto rows = store_.get_all(table());
  if (!rows.ok()) return rows.status().with_context("rewinding job " + job_.short_hex() + " to epoch " + std::to_string(from_epoch));
  const std::string prefix = job_.hex() + "/";
  int reset = 0;
  for (const auto& [k, bytes] : *rows) {
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    ShardRecord r;
    Status st = gcs::decode(bytes, &r);
    if (!st.ok()) return st.with_context(std::string(table()) + "/" + k);
    if (r.epoch < from_epoch || r.state == ShardState::unassigned) continue;
    bool changed = true;
    TROUPE_RETURN_IF_ERROR(modify(r.epoch, r.shard, [&](ShardRecord& now) -> Expected<bool> {
      if (now.state == ShardState::unassigned) return changed = false;
      now.state = ShardState::unassigned;
      now.owner = WorkerId();
      now.resume_at = 0;
      return true;
    }));
    reset += changed ? 1 : 0;
  }
  return reset;
}

Expected<std::vector<ShardRecord>> ShardLedger::epoch_status(int epoch) {
  std::vector<ShardRecord> out;
  out.reserve(static_cast<size_t>(options_.shards));
  for (int s = 0; s < options_.shards; ++s) {
    auto r = read(epoch, s);
    if (!r.ok()) return r.status();
    if (r->has_value()) out.push_back((*r)->record);
  }
  if (out.empty()) {
    return not_found("epoch " + std::to_string(epoch) + " of job " + job_.short_hex() + " has no shards in the GCS");
  }
  return out;
}

Expected<bool> ShardLedger::epoch_done(int epoch) {
  auto shards = epoch_status(epoch);
  if (!shards.ok()) return shards.status();
  if (static_cast<int>(shards->size()) != options_.shards) return false;
  return std::all_of(shards->begin(), shards->end(), [](const ShardRecord& r) { return r.state == ShardState::done; });
}

}  // namespace troupe::data
