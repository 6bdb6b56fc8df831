#include "gcs/async_accounting.h"

#include <algorithm>
#include <map>
#include <utility>

#include "gcs/record_fields.h"
#include "gcs/records.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the record helpers

std::string encode(const PsAppliedRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 8);
    pack_id(pk, r.job);
    pk.pack_int32(r.server);
    pk.pack_int32(r.attempt);
    pk.pack_int64(r.restored_step);
    if (r.restored_record) pk.pack_true();
    else pk.pack_false();
    pk.pack_int64(r.replayed);
    pk.pack_array(static_cast<uint32_t>(r.shards.size()));
    for (const AppliedCount& c : r.shards) {
      pk.pack_array(5);
      pk.pack_int32(c.epoch);
      pk.pack_int32(c.shard);
      pk.pack_int64(c.applied);
      pk.pack_int64(c.duplicates);
      pk.pack_int64(c.gaps);
    }
    pk.pack_int64(r.recorded_ms);
  });
}

Status decode(const std::string& bytes, PsAppliedRecord* out) {
  return read_record(bytes, "parameter server's applied data", 8, out, [](Fields& f, PsAppliedRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("job", &r.job));
    TROUPE_RETURN_IF_ERROR(f.i32("server", &r.server));
    TROUPE_RETURN_IF_ERROR(f.i32("attempt", &r.attempt));
    TROUPE_RETURN_IF_ERROR(f.i64("restored_step", &r.restored_step));
    TROUPE_RETURN_IF_ERROR(f.boolean("restored_record", &r.restored_record));
    TROUPE_RETURN_IF_ERROR(f.i64("replayed", &r.replayed));
    TROUPE_RETURN_IF_ERROR(f.list("shards", 5, &r.shards, [](Fields& s, AppliedCount* c) -> Status {
      TROUPE_RETURN_IF_ERROR(s.i32("epoch", &c->epoch));
      TROUPE_RETURN_IF_ERROR(s.i32("shard", &c->shard));
      TROUPE_RETURN_IF_ERROR(s.i64("applied", &c->applied));
      TROUPE_RETURN_IF_ERROR(s.i64("duplicates", &c->duplicates));
      return s.i64("gaps", &c->gaps);
    }));
    return f.i64("recorded_ms", &r.recorded_ms);
  });
}

std::string record_key(const PsAppliedRecord& r) { return r.job.hex() + "/" + std::to_string(r.server); }

std::string AsyncAccountingReport::summary() const {
  if (exactly_once) {
    return "every shard of epochs 1-" + std::to_string(epochs) + " trained exactly once: on each of " +
           std::to_string(servers) + " parameter server(s), every example of the " + std::to_string(shards) +
           " shards per epoch (" + std::to_string(examples) + " in all) applied once, none twice, none skipped (" +
           std::to_string(reclaimed_shards) + " shard claims repeated, " + std::to_string(resumed_mid_shard) +
           " resumed mid-shard where the servers' applied data ended" +
           (restored_servers > 0 ? "; " + std::to_string(restored_servers) + " server(s) restored from a checkpoint, " +
                                       std::to_string(replayed) + " pushes replayed to them"
                                 : std::string()) +
           (resumed_servers > 0 ? "; the servers started from the resumed job's checkpoint, their records caught up"
                                : std::string()) +
           ")";
  }
  std::string s = "data accounting failed: ";
  for (size_t i = 0; i < problems.size() && i < 5; ++i) s += (i ? "; " : "") + problems[i];
  if (problems.size() > 5) s += "; and " + std::to_string(problems.size() - 5) + " more";
  return s;
}

Expected<AsyncAccountingReport> account_async_job(Store& store, const JobId& job, int epochs, int shards, int servers) {
  if (epochs < 1 || shards < 1 || servers < 1)
    return invalid_argument("account_async_job: epochs, shards and servers must be >= 1");
  AsyncAccountingReport rep;
  rep.epochs = epochs;
  rep.shards = shards;
  rep.servers = servers;
  // The ledger: every shard DONE; its size is what every server must have applied.
  std::map<std::pair<int, int>, int64_t> sizes;
  Table<ShardRecord> ledger(store);
  for (int e = 1; e <= epochs; ++e) {
    for (int s = 0; s < shards; ++s) {
      auto rec = ledger.get(job.hex() + "/" + std::to_string(e) + "/" + std::to_string(s));
      if (!rec.ok() && rec.status().code() != Code::not_found) return rec.status();
      const std::string which = "shard " + std::to_string(s) + " of epoch " + std::to_string(e);
      if (!rec.ok()) {
        rep.problems.push_back(which + " was never recorded in the ledger");
        continue;
      }
      if (rec->state != ShardState::done) rep.problems.push_back(which + " is " + shard_state_name(rec->state) + ", not DONE");
      sizes[{e, s}] = rec->examples;
      rep.examples += rec->examples;
      rep.reclaimed_shards += std::max(0, rec->claims - 1);
      rep.resumed_mid_shard += rec->resume_at > 0;
    }
  }
  // Every server: each shard's examples applied exactly once.
  Table<PsAppliedRecord> applied(store);
  for (int p = 0; p < servers; ++p) {
    const std::string server = "parameter server " + std::to_string(p);
    auto rec = applied.get(job.hex() + "/" + std::to_string(p));
    if (!rec.ok() && rec.status().code() != Code::not_found) return rec.status();
    if (!rec.ok()) {
      rep.problems.push_back(server + " recorded no applied data (it never saw every worker finish)");
      continue;
    }
    if (rec->restored_step >= 0 && !rec->restored_record) {
      rep.problems.push_back(server + " was restored from the checkpoint of version " +
                             std::to_string(rec->restored_step) + ", which holds no record of the data applied " +
                             "before it, so exactly-once cannot be shown for its parameters");
      continue;
    }
    if (rec->restored_step >= 0 && rec->attempt > 0) {  // a replacement of a failed server
      ++rep.restored_servers;
      rep.replayed += rec->replayed;
    } else if (rec->restored_step >= 0) {  // attempt 0: the job resumed another's checkpoint
      ++rep.resumed_servers;
    }
    std::map<std::pair<int, int>, AppliedCount> seen;
    for (const AppliedCount& c : rec->shards) {
      if (!sizes.count({c.epoch, c.shard}) && (c.epoch < 1 || c.epoch > epochs || c.shard < 0 || c.shard >= shards))
        rep.problems.push_back(server + " applied " + std::to_string(c.applied) + " examples of shard " +
                               std::to_string(c.shard) + " of epoch " + std::to_string(c.epoch) +
                               ", which the job does not have");
      seen[{c.epoch, c.shard}] = c;
    }
    for (const auto& [key, size] : sizes) {
      const std::string which = server + ": shard " + std::to_string(key.second) + " of epoch " + std::to_string(key.first);
      auto it = seen.find(key);
      const AppliedCount c = it == seen.end() ? AppliedCount{} : it->second;
      if (c.duplicates > 0 || c.gaps > 0 || c.applied != size) {
        std::string what = which + ": " + std::to_string(c.applied) + " of " + std::to_string(size) + " examples applied";
        if (c.duplicates > 0) what += ", " + std::to_string(c.duplicates) + " of them twice";
        if (c.gaps > 0) what += ", " + std::to_string(c.gaps) + " skipped over";
        if (c.applied - c.duplicates < size && c.gaps == 0) what += ", " + std::to_string(size - (c.applied - c.duplicates)) + " never";
        rep.problems.push_back(what);
      }
    }
  }
  rep.exactly_once = rep.problems.empty();
  return rep;
}

}  // namespace troupe::gcs
