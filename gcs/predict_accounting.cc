#include "gcs/predict_accounting.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "gcs/record_fields.h"
#include "gcs/tables.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the record helpers

std::string encode(const PredictedPart& r) {
  return write([&](Packer& pk) {
    begin(pk, 14);
    pack_id(pk, r.job);
    pk.pack_int32(r.shard);
    pk.pack_int64(r.first_row);
    pk.pack_int64(r.rows);
    pk.pack_int64(r.width);
    pack_id(pk, r.owner);
    pk.pack_int32(r.attempt);
    put_str(pk, r.checksum);
    pk.pack_int64(r.right);
    pk.pack_int64(r.scored);
    pk.pack_double(r.squared);
    pk.pack_int64(r.started_ms);
    pk.pack_int64(r.finished_ms);
    if (r.assembled) pk.pack_true(); else pk.pack_false();
  });
}

Status decode(const std::string& bytes, PredictedPart* out) {
  return read_record(bytes, "predicted part", 14, out, [](Fields& f, PredictedPart& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("job", &r.job));
    TROUPE_RETURN_IF_ERROR(f.i32("shard", &r.shard));
    TROUPE_RETURN_IF_ERROR(f.i64("first_row", &r.first_row));
    TROUPE_RETURN_IF_ERROR(f.i64("rows", &r.rows));
    TROUPE_RETURN_IF_ERROR(f.i64("width", &r.width));
    TROUPE_RETURN_IF_ERROR(f.id("owner", &r.owner));
    TROUPE_RETURN_IF_ERROR(f.i32("attempt", &r.attempt));
    TROUPE_RETURN_IF_ERROR(f.str("checksum", &r.checksum));
    TROUPE_RETURN_IF_ERROR(f.i64("right", &r.right));
    TROUPE_RETURN_IF_ERROR(f.i64("scored", &r.scored));
    TROUPE_RETURN_IF_ERROR(f.f64("squared", &r.squared));
    TROUPE_RETURN_IF_ERROR(f.i64("started_ms", &r.started_ms));
    TROUPE_RETURN_IF_ERROR(f.i64("finished_ms", &r.finished_ms));
    return f.boolean("assembled", &r.assembled);
  });
}

WorkerId predictor_identity(const JobId& job, int index) {
  std::array<uint8_t, 16> b = job.bytes();
  for (int i = 0; i < 4; ++i) b[8 + i] ^= static_cast<uint8_t>((static_cast<uint32_t>(index) + 1) >> (8 * i));
  b[0] ^= 0xa5;
  return WorkerId::from_bytes(b);
}

std::string record_key(const PredictedPart& r) { return r.job.hex() + "/" + std::to_string(r.shard); }

Expected<std::vector<PredictedPart>> predicted_parts(Store& store, const JobId& job) {
  auto all = Table<PredictedPart>(store).list();
  if (!all.ok()) return all.status();
  std::vector<PredictedPart> mine;
  for (PredictedPart& p : *all)
    if (p.job == job) mine.push_back(std::move(p));
  std::sort(mine.begin(), mine.end(), [](const PredictedPart& a, const PredictedPart& b) { return a.shard < b.shard; });
  return mine;
}

std::string PredictAccounting::summary() const {
  if (exactly_once) {
    return "every row of " + std::to_string(rows) + " predicted exactly once and assembled in input order (" +
           std::to_string(shards) + " shards; " + std::to_string(attempts) + " predictor attempt" +
           (attempts == 1 ? "" : "s") + ", " + std::to_string(reclaimed_shards) + " shard claims repeated)";
  }
  std::string s = "prediction accounting failed: ";
  for (size_t i = 0; i < problems.size() && i < 5; ++i) s += (i ? "; " : "") + problems[i];
  if (problems.size() > 5) s += "; and " + std::to_string(problems.size() - 5) + " more";
  return s;
}

Expected<PredictAccounting> account_predict_job(Store& store, const JobId& job, int shards, int64_t rows) {
  if (shards < 1 || rows < 1) return invalid_argument("account_predict_job: shards and rows must be >= 1");
  PredictAccounting rep;
  rep.rows = rows;
  rep.shards = shards;
  auto parts = predicted_parts(store, job);
  if (!parts.ok()) return parts.status().with_context("reading the predicted parts of job " + job.short_hex());
  std::map<int, PredictedPart> by_shard;
  std::set<std::pair<WorkerId, int>> attempts;
  for (const PredictedPart& p : *parts) {
    if (p.shard < 0 || p.shard >= shards) rep.problems.push_back("a part of shard " + std::to_string(p.shard) + ", which the job does not have");
    by_shard[p.shard] = p;
    attempts.insert({p.owner, p.attempt});
  }
  rep.attempts = static_cast<int>(attempts.size());
  Table<ShardRecord> shards_table(store);
  int64_t next = 0;  // the first row not yet covered
  for (int s = 0; s < shards; ++s) {
    const std::string which = "shard " + std::to_string(s);
    auto rec = shards_table.get(job.hex() + "/1/" + std::to_string(s));
    if (!rec.ok() && rec.status().code() != Code::not_found) return rec.status();
    if (!rec.ok()) {
      rep.problems.push_back(which + " was never recorded in the ledger");
      continue;
    }
    if (rec->state != ShardState::done) rep.problems.push_back(which + " is " + shard_state_name(rec->state) + ", not DONE");
    rep.reclaimed_shards += std::max(0, rec->claims - 1);
    auto p = by_shard.find(s);
    if (p == by_shard.end()) {
      rep.problems.push_back(which + " has no predicted part");
      continue;
    }
    const PredictedPart& part = p->second;
    if (part.first_row > next)
      rep.problems.push_back("rows " + std::to_string(next) + "-" + std::to_string(part.first_row - 1) + " never predicted");
    if (part.first_row < next)
      rep.problems.push_back("rows " + std::to_string(part.first_row) + "-" + std::to_string(next - 1) + " predicted twice");
    if (part.rows != rec->examples)
      rep.problems.push_back(which + "'s part has " + std::to_string(part.rows) + " rows, the shard " +
                             std::to_string(rec->examples));
    if (!part.assembled) rep.problems.push_back(which + "'s part was not assembled into the output");
    next = std::max(next, part.first_row + part.rows);
  }
  if (next < rows) rep.problems.push_back("rows " + std::to_string(next) + "-" + std::to_string(rows - 1) + " never predicted");
  if (next > rows) rep.problems.push_back("parts reach row " + std::to_string(next - 1) + " of " + std::to_string(rows));
  rep.exactly_once = rep.problems.empty();
  return rep;
}

}  // namespace troupe::gcs
