#include "gcs/data_accounting.h"

#include <algorithm>
#include <map>
#include <set>

#include "gcs/events.h"
#include "gcs/record_fields.h"
#include "gcs/tables.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the record helpers

std::string encode(const TrainedRange& r) {
  return write([&](Packer& pk) {
    begin(pk, 7);
    pack_id(pk, r.job);
    pk.pack_int32(r.attempt);
    pk.pack_int32(r.epoch);
    pk.pack_int64(r.first_step);
    pk.pack_int64(r.end_step);
    pk.pack_int64(r.global_end_step);
    pk.pack_int64(r.recorded_ms);
  });
}

Status decode(const std::string& bytes, TrainedRange* out) {
  return read_record(bytes, "trained range", 7, out, [](Fields& f, TrainedRange& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("job", &r.job));
    TROUPE_RETURN_IF_ERROR(f.i32("attempt", &r.attempt));
    TROUPE_RETURN_IF_ERROR(f.i32("epoch", &r.epoch));
    TROUPE_RETURN_IF_ERROR(f.i64("first_step", &r.first_step));
    TROUPE_RETURN_IF_ERROR(f.i64("end_step", &r.end_step));
    TROUPE_RETURN_IF_ERROR(f.i64("global_end_step", &r.global_end_step));
    return f.i64("recorded_ms", &r.recorded_ms);
  });
}

std::string record_key(const TrainedRange& r) {
  return r.job.hex() + "/" + std::to_string(r.epoch) + "/" + std::to_string(r.first_step);
}

Status record_trained(Store& store, const JobId& job, int attempt, int from_epoch, int64_t from_step, int to_epoch,
                      int64_t to_step, int64_t steps_per_epoch, int64_t global_to) {
  if (steps_per_epoch <= 0) return invalid_argument("record_trained: steps per epoch must be > 0");
  if (to_epoch < from_epoch || (to_epoch == from_epoch && to_step < from_step)) {
    return invalid_argument("record_trained: epoch " + std::to_string(to_epoch) + " step " + std::to_string(to_step) +
                            " is before epoch " + std::to_string(from_epoch) + " step " + std::to_string(from_step));
  }
  std::vector<TrainedRange> rows;
  // The job's step count at the start of each epoch's piece, walking back from global_to.
  int64_t global_end = global_to;
  for (int e = to_epoch; e >= from_epoch; --e) {
    TrainedRange r;
    r.job = job;
    r.attempt = attempt;
    r.epoch = e;
    r.first_step = e == from_epoch ? from_step : 0;
    r.end_step = e == to_epoch ? to_step : steps_per_epoch;
    r.global_end_step = global_end;
    r.recorded_ms = now_ms();
    global_end -= r.end_step - r.first_step;
    if (r.end_step > r.first_step) rows.push_back(r);
  }
  if (rows.empty()) return {};
  return Table<TrainedRange>(store).put_many(rows);
}

Expected<std::vector<TrainedRange>> trained_ranges(Store& store, const JobId& job) {
  auto all = Table<TrainedRange>(store).list();
  if (!all.ok()) return all.status();
  std::vector<TrainedRange> mine;
  for (TrainedRange& r : *all) if (r.job == job) mine.push_back(std::move(r));
  std::sort(mine.begin(), mine.end(), [](const TrainedRange& a, const TrainedRange& b) {
    return a.epoch != b.epoch ? a.epoch < b.epoch : a.first_step < b.first_step;
  });
  return mine;
}

Expected<int> discard_ranges_after(Store& store, const JobId& job, int64_t global_step) {
  auto ranges = trained_ranges(store, job);
  if (!ranges.ok()) return ranges.status();
  int removed = 0;
  for (const TrainedRange& r : *ranges) {
    if (r.global_end_step <= global_step) continue;
    TROUPE_RETURN_IF_ERROR(Table<TrainedRange>(store).remove(record_key(r)));
    ++removed;
  }
  return removed;
}

std::string AccountingReport::summary() const {
  if (exactly_once && shards == 0) {
    return "every step of epochs 1-" + std::to_string(epochs) + " trained exactly once (" +
           std::to_string(steps_per_epoch) + " steps per epoch, each step's batch by its place in the seeded order; " +
           std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") + ")";
  }
  if (exactly_once) {
    return "every shard of epochs 1-" + std::to_string(epochs) + " trained exactly once (" + std::to_string(shards) +
           " shards x " + std::to_string(steps_per_epoch) + " steps per epoch; " + std::to_string(attempts) +
           " attempt" + (attempts == 1 ? "" : "s") + ", " + std::to_string(reclaimed_shards) + " shard claims repeated)";
  }
  std::string s = "data accounting failed: ";
  for (size_t i = 0; i < problems.size() && i < 5; ++i) s += (i ? "; " : "") + problems[i];
  if (problems.size() > 5) s += "; and " + std::to_string(problems.size() - 5) + " more";
  return s;
}

namespace {

// The gaps and overlaps of `ranges` (one epoch's, sorted by first step) over [0, steps).
void check_tiling(int epoch, const std::vector<TrainedRange>& ranges, int64_t steps, std::vector<std::string>* problems) {
  const std::string where = "epoch " + std::to_string(epoch) + ": ";
  int64_t next = 0;
  for (const TrainedRange& r : ranges) {
    if (r.first_step > next) {
      problems->push_back(where + "steps " + std::to_string(next) + "-" + std::to_string(r.first_step - 1) + " never kept");
    } else if (r.first_step < next) {
      problems->push_back(where + "steps " + std::to_string(r.first_step) + "-" +
                          std::to_string(std::min(next, r.end_step) - 1) + " kept twice (attempt " +
                          std::to_string(r.attempt) + ")");
    }
    next = std::max(next, r.end_step);
  }
  if (next < steps) problems->push_back(where + "steps " + std::to_string(next) + "-" + std::to_string(steps - 1) + " never kept");
  if (next > steps) problems->push_back(where + "kept steps up to " + std::to_string(next - 1) + " of " + std::to_string(steps));
}

}  // namespace

Expected<AccountingReport> account_sync_job(Store& store, const JobId& job, int64_t total_steps,
                                            int64_t steps_per_epoch, int shards) {
  if (steps_per_epoch <= 0 || total_steps <= 0 || shards < 0)
    return invalid_argument("account_sync_job: steps and steps per epoch must be > 0, shards >= 0");
  AccountingReport rep;
  rep.epochs = static_cast<int>((total_steps + steps_per_epoch - 1) / steps_per_epoch);
  rep.shards = shards;
  rep.steps_per_epoch = steps_per_epoch;
  auto ranges = trained_ranges(store, job);
  if (!ranges.ok()) return ranges.status().with_context("reading the trained ranges of job " + job.short_hex());
  std::map<int, std::vector<TrainedRange>> by_epoch;
  std::set<int> attempts;
  for (const TrainedRange& r : *ranges) {
    by_epoch[r.epoch].push_back(r);
    attempts.insert(r.attempt);
  }
  rep.attempts = static_cast<int>(attempts.size());
  for (const auto& [epoch, list] : by_epoch) {
    if (epoch < 1 || epoch > rep.epochs) rep.problems.push_back("steps kept in epoch " + std::to_string(epoch) + ", which the job does not have");
  }
  Table<ShardRecord> shards_table(store);
  for (int e = 1; e <= rep.epochs; ++e) {
    const int64_t steps = std::min(steps_per_epoch, total_steps - (e - 1) * steps_per_epoch);
    check_tiling(e, by_epoch[e], steps, &rep.problems);
    for (int s = 0; s < shards; ++s) {
      auto rec = shards_table.get(job.hex() + "/" + std::to_string(e) + "/" + std::to_string(s));
      if (!rec.ok() && rec.status().code() != Code::not_found) return rec.status();
      const std::string which = "shard " + std::to_string(s) + " of epoch " + std::to_string(e);
      if (!rec.ok()) {
        rep.problems.push_back(which + " was never recorded");
      } else if (rec->state != ShardState::done) {
        rep.problems.push_back(which + " is " + shard_state_name(rec->state) + ", not DONE");
      } else {
        rep.reclaimed_shards += std::max(0, rec->claims - 1);
      }
    }
  }
  rep.exactly_once = rep.problems.empty();
  return rep;
}

}  // namespace troupe::gcs
