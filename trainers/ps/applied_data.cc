#include "trainers/ps/applied_data.h"

#include <algorithm>

#include "core/codec.h"

namespace troupe::ps {
namespace {

// The encoding's own version (inside the shard file's blob, which carries no schema of its own).
constexpr uint32_t kAppliedFormat = 1;

// The msgpack integer at o, or false when it is not one.
bool as_int(const msgpack::object& o, int64_t* out) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(o.via.u64);
    return true;
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    *out = o.via.i64;
    return true;
  }
  return false;
}

// The array at o of exactly n integers (n < 0: any length) into out.
bool as_ints(const msgpack::object& o, int n, std::vector<int64_t>* out) {
  if (o.type != msgpack::type::ARRAY || (n >= 0 && o.via.array.size != static_cast<uint32_t>(n))) return false;
  out->resize(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i)
    if (!as_int(o.via.array.ptr[i], &(*out)[i])) return false;
  return true;
}

}  // namespace

std::string AppliedData::record(int worker, int64_t clock, const DataTag& tag) {
  last_clock_[static_cast<size_t>(worker)] = std::max(last_clock_[static_cast<size_t>(worker)], clock);
  if (tag.empty()) return {};
  last_[static_cast<size_t>(worker)] = tag;
  return record_examples(tag);
}

void AppliedData::forget_workers() {
  std::fill(last_.begin(), last_.end(), DataTag{});
  std::fill(last_clock_.begin(), last_clock_.end(), -1);
}

std::string AppliedData::record_examples(const DataTag& tag) {
  std::string problems;
  for (const DataSpan& d : tag) {
    AppliedShard& s = shards_[{d.epoch, d.shard}];
    s.epoch = d.epoch;
    s.shard = d.shard;
    const int64_t end = d.offset + d.rows;
    const std::string which = "epoch " + std::to_string(d.epoch) + " shard " + std::to_string(d.shard) + " [" +
                              std::to_string(d.offset) + ", " + std::to_string(end) + ")";
    if (d.offset < s.next) {  // examples [offset, min(end, next)) were applied before
      const int64_t again = std::min(end, s.next) - d.offset;
      s.duplicates += again;
      problems += (problems.empty() ? "" : "; ") + which + " repeats " + std::to_string(again) +
                  " examples already applied (expected offset " + std::to_string(s.next) + ")";
    } else if (d.offset > s.next) {
      s.gaps += d.offset - s.next;
      problems += (problems.empty() ? "" : "; ") + which + " skips examples [" + std::to_string(s.next) + ", " +
                  std::to_string(d.offset) + ")";
    }
    s.applied += d.rows;
    s.next = std::max(s.next, end);
  }
  return problems;
}

std::vector<AppliedShard> AppliedData::shards() const {
  std::vector<AppliedShard> out;
  out.reserve(shards_.size());
  for (const auto& [key, s] : shards_) out.push_back(s);
  return out;
}

// [format, [[last clock, [[epoch, shard, offset, rows], ...]] per worker],
//  [[epoch, shard, applied, next, duplicates, gaps], ...]]
std::string AppliedData::encode() const {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_array(3);
  pk.pack_uint32(kAppliedFormat);
  pk.pack_array(static_cast<uint32_t>(last_.size()));
  for (size_t w = 0; w < last_.size(); ++w) {
    pk.pack_array(2);
    pk.pack_int64(last_clock_[w]);
    pk.pack_array(static_cast<uint32_t>(last_[w].size()));
    for (const DataSpan& d : last_[w]) {
      pk.pack_array(4);
      pk.pack_int64(d.epoch);
      pk.pack_int64(d.shard);
      pk.pack_int64(d.offset);
      pk.pack_int64(d.rows);
    }
  }
  pk.pack_array(static_cast<uint32_t>(shards_.size()));
  for (const auto& [key, s] : shards_) {
    pk.pack_array(6);
    pk.pack_int64(s.epoch);
    pk.pack_int64(s.shard);
    pk.pack_int64(s.applied);
    pk.pack_int64(s.next);
    pk.pack_int64(s.duplicates);
    pk.pack_int64(s.gaps);
  }
  return std::string(buf.data(), buf.size());
}

Expected<AppliedData> AppliedData::decode(const std::string& bytes, int workers) {
  const std::string what = "a parameter shard's applied-data record";
  msgpack::object_handle h;
  TROUPE_RETURN_IF_ERROR(parse_msgpack(bytes, &h, what));
  const msgpack::object& o = h.get();
  auto bad = [&](const std::string& why) { return corrupt_data(what + " is malformed: " + why); };
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 3) return bad("not [format, workers, shards]");
  int64_t format = 0;
  if (!as_int(o.via.array.ptr[0], &format)) return bad("its format is not an integer");
  if (format != kAppliedFormat)
    return bad("format " + std::to_string(format) + "; this troupe reads " + std::to_string(kAppliedFormat));
  // Epochs and shards are int32 and >= 0 (epochs >= 1), counts and offsets >= 0.
  auto id_ok = [](int64_t v, int64_t low) { return v >= low && v <= INT32_MAX; };
  const msgpack::object& ws = o.via.array.ptr[1];
  if (ws.type != msgpack::type::ARRAY) return bad("the workers are not an array");
  if (ws.via.array.size != static_cast<uint32_t>(workers))
    return invalid_argument(what + " has " + std::to_string(ws.via.array.size) + " workers; the job has " +
                            std::to_string(workers));
  AppliedData d(workers);
  for (int w = 0; w < workers; ++w) {
    const msgpack::object& e = ws.via.array.ptr[w];
    if (e.type != msgpack::type::ARRAY || e.via.array.size != 2 || !as_int(e.via.array.ptr[0], &d.last_clock_[w]) ||
        e.via.array.ptr[1].type != msgpack::type::ARRAY)
      return bad("worker " + std::to_string(w) + " is not [last clock, spans]");
    const msgpack::object& spans = e.via.array.ptr[1];
    for (uint32_t i = 0; i < spans.via.array.size; ++i) {
      std::vector<int64_t> v;
      if (!as_ints(spans.via.array.ptr[i], 4, &v) || !id_ok(v[0], 1) || !id_ok(v[1], 0) || v[2] < 0 || v[3] < 0)
        return bad("span " + std::to_string(i) + " of worker " + std::to_string(w) +
                   " is not [epoch >= 1, shard >= 0, offset >= 0, rows >= 0]");
      d.last_[w].push_back(DataSpan{static_cast<int32_t>(v[0]), static_cast<int32_t>(v[1]), v[2], v[3]});
    }
  }
  const msgpack::object& ss = o.via.array.ptr[2];
  if (ss.type != msgpack::type::ARRAY) return bad("the shards are not an array");
  for (uint32_t i = 0; i < ss.via.array.size; ++i) {
    std::vector<int64_t> v;
    if (!as_ints(ss.via.array.ptr[i], 6, &v) || !id_ok(v[0], 1) || !id_ok(v[1], 0) || v[2] < 0 || v[3] < 0 ||
        v[4] < 0 || v[5] < 0)
      return bad("shard entry " + std::to_string(i) + " is not [epoch >= 1, shard >= 0, and four counts >= 0]");
    AppliedShard s{static_cast<int>(v[0]), static_cast<int>(v[1]), v[2], v[3], v[4], v[5]};
    d.shards_[{s.epoch, s.shard}] = s;
  }
  return d;
}

}  // namespace troupe::ps
