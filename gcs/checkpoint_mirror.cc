#include "gcs/checkpoint_mirror.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "core/durable_file.h"
#include "gcs/record_fields.h"
#include "gcs/tables.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the record helpers

namespace {

constexpr char kMagic[8] = {'T', 'R', 'P', 'M', 'A', 'N', 'I', '1'};
constexpr uint32_t kPayloadFields = 6;  // format, manifest, first step, steps per epoch, ranges, ledger

// The global steps [begin, end) a range covers.
std::pair<int64_t, int64_t> global_span(const TrainedRange& r, int64_t steps_per_epoch) {
  const int64_t base = (static_cast<int64_t>(r.epoch) - 1) * steps_per_epoch;
  return {base + r.first_step, base + r.end_step};
}

// The elements of `array`, each binary bytes decoded as an R (a GCS record).
template <class R>
Status read_records(const msgpack::object& array, const std::string& what, std::vector<R>* out) {
  if (array.type != msgpack::type::ARRAY) return corrupt_data(what + ": expected an array, found " + kind_of(array));
  std::vector<R> items(array.via.array.size);
  for (uint32_t k = 0; k < array.via.array.size; ++k) {
    const msgpack::object& item = array.via.array.ptr[k];
    const std::string which = what + "[" + std::to_string(k) + "]";
    if (item.type != msgpack::type::BIN) return corrupt_data(which + ": expected binary bytes, found " + kind_of(item));
    TROUPE_RETURN_IF_ERROR(decode(std::string(item.via.bin.ptr, item.via.bin.size), &items[k]).with_context(which));
  }
  *out = std::move(items);
  return {};
}

// The contents agree with each other: one job, a manifest with shards, ranges through its step
// that tile it, ledger records of epochs that step finished.
Status check_contents(const CheckpointMirror& m) {
  const CheckpointRecord& c = m.manifest;
  if (c.shards.empty()) return corrupt_data("its manifest lists no shards");
  if (m.steps_per_epoch < 0 || m.first_step < 0 || m.first_step > c.step)
    return corrupt_data("steps per epoch " + std::to_string(m.steps_per_epoch) + " and first step " +
                        std::to_string(m.first_step) + " do not fit step " + std::to_string(c.step));
  if (m.steps_per_epoch == 0) {
    if (!m.trained.empty() || !m.ledger.empty()) return corrupt_data("trained ranges or ledger records without steps per epoch");
    return {};
  }
  for (const TrainedRange& r : m.trained) {
    if (r.job != c.job) return corrupt_data("a trained range of job " + r.job.short_hex() + ", not " + c.job.short_hex());
  }
  for (const ShardRecord& s : m.ledger) {
    if (s.job != c.job) return corrupt_data("a ledger record of job " + s.job.short_hex() + ", not " + c.job.short_hex());
    if (static_cast<int64_t>(s.epoch) * m.steps_per_epoch > c.step || s.state != ShardState::done)
      return corrupt_data("the ledger record of shard " + std::to_string(s.shard) + " of epoch " +
                          std::to_string(s.epoch) + " is not a DONE shard of an epoch finished by step " +
                          std::to_string(c.step));
  }
  return check_ranges_tile(m.trained, m.steps_per_epoch, m.first_step, c.step);
}

}  // namespace

std::string mirror_path(const std::string& step_dir) { return step_dir + "/" + kMirrorFileName; }

std::string encode_mirror(const CheckpointMirror& m) {
  std::string payload = write([&](Packer& pk) {
    pk.pack_array(kPayloadFields);
    pk.pack_uint32(kMirrorFormatVersion);
    put_bin(pk, encode(m.manifest));
    pk.pack_int64(m.first_step);
    pk.pack_int64(m.steps_per_epoch);
    pk.pack_array(static_cast<uint32_t>(m.trained.size()));
    for (const TrainedRange& r : m.trained) put_bin(pk, encode(r));
    pk.pack_array(static_cast<uint32_t>(m.ledger.size()));
    for (const ShardRecord& s : m.ledger) put_bin(pk, encode(s));
  });
  std::string bytes(kMagic, sizeof kMagic);
  bytes += payload;
  const uint64_t sum = XXH64(bytes.data(), bytes.size(), 0);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((sum >> (8 * i)) & 0xff));
  return bytes;
}

Status decode_mirror(const std::string& bytes, const std::string& path, CheckpointMirror* out) {
  const std::string what = "checkpoint manifest " + path;
  auto bad = [&](const std::string& why) {
    return corrupt_data(what + ": " + why + "; this checkpoint is not used (delete its step directory if it is garbage)");
  };
  if (bytes.size() < sizeof kMagic + 8) return bad(std::to_string(bytes.size()) + " bytes, too short for a manifest");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return bad("not a troupe checkpoint manifest (wrong magic)");
  uint64_t sum = 0;
  for (int i = 0; i < 8; ++i)
    sum |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[bytes.size() - 8 + i])) << (8 * i);
  if (XXH64(bytes.data(), bytes.size() - 8, 0) != sum) return bad("checksum mismatch (the file is damaged)");
  const std::string_view payload(bytes.data() + sizeof kMagic, bytes.size() - sizeof kMagic - 8);
  msgpack::object_handle h;
  Status st = parse_msgpack(payload, &h, what);
  if (!st.ok()) return bad(st.message());
  const msgpack::object& o = h.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size == 0) return bad("expected an array [format version, ...]");
  const msgpack::object& v = o.via.array.ptr[0];
  if (v.type != msgpack::type::POSITIVE_INTEGER) return bad("format version: expected an unsigned integer");
  if (v.via.u64 != kMirrorFormatVersion) {
    return Status(Code::version_mismatch, what + " is of format " + std::to_string(v.via.u64) + "; this troupe reads format " +
                                              std::to_string(kMirrorFormatVersion) + ": resume it with the troupe that wrote it");
  }
  st = Fields::check_array(o, kPayloadFields, what);
  if (!st.ok()) return bad(st.message());
  CheckpointMirror m;
  Fields f(o, 1, "");
  std::string manifest;
  st = f.bin("manifest", &manifest);
  if (st.ok()) st = decode(manifest, &m.manifest).with_context("its manifest");
  if (st.ok()) st = f.i64("first_step", &m.first_step);
  if (st.ok()) st = f.i64("steps_per_epoch", &m.steps_per_epoch);
  if (st.ok()) st = read_records(o.via.array.ptr[4], "trained ranges", &m.trained);
  if (st.ok()) st = read_records(o.via.array.ptr[5], "ledger records", &m.ledger);
  if (st.ok()) st = check_contents(m);
  if (st.code() == Code::version_mismatch) return st.with_context(what);
  if (!st.ok()) return bad(st.message());
  *out = std::move(m);
  return {};
}

Status check_ranges_tile(const std::vector<TrainedRange>& ranges, int64_t steps_per_epoch, int64_t first_step,
                         int64_t last_step) {
  if (steps_per_epoch <= 0) return invalid_argument("check_ranges_tile: steps per epoch must be > 0");
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const TrainedRange& r : ranges) spans.push_back(global_span(r, steps_per_epoch));
  std::sort(spans.begin(), spans.end());
  // Steps are counted from 1: (first_step, last_step] is [first_step, last_step) 0-based.
  int64_t next = first_step;
  for (const auto& [begin, end] : spans) {
    if (begin > next)
      return corrupt_data("steps " + std::to_string(next + 1) + "-" + std::to_string(begin) + " are in no trained range");
    if (begin < next)
      return corrupt_data("steps " + std::to_string(begin + 1) + "-" + std::to_string(std::min(next, end)) +
                          " are in two trained ranges");
    next = end;
  }
  if (next != last_step)
    return corrupt_data("the trained ranges end at step " + std::to_string(next) + ", not at step " + std::to_string(last_step));
  return {};
}

Expected<CheckpointMirror> gather_mirror(Store& store, const CheckpointRecord& manifest, int64_t steps_per_epoch,
                                         int64_t first_step) {
  CheckpointMirror m;
  m.manifest = manifest;
  if (steps_per_epoch <= 0) return m;
  m.steps_per_epoch = steps_per_epoch;
  m.first_step = first_step;
  auto ranges = trained_ranges(store, manifest.job);
  if (!ranges.ok()) return ranges.status().with_context("reading the trained ranges to mirror");
  for (TrainedRange& r : *ranges)
    if (r.global_end_step <= manifest.step) m.trained.push_back(std::move(r));
  auto shards = Table<ShardRecord>(store).list();
  if (!shards.ok()) return shards.status().with_context("reading the shard ledger to mirror");
  for (ShardRecord& s : *shards) {
    if (s.job != manifest.job || static_cast<int64_t>(s.epoch) * steps_per_epoch > manifest.step) continue;
    if (s.state != ShardState::done) {  // its epoch's last step is in the checkpoint (see the header)
      s.state = ShardState::done;
      s.progress = s.examples;
    }
    m.ledger.push_back(std::move(s));
  }
  std::sort(m.ledger.begin(), m.ledger.end(), [](const ShardRecord& a, const ShardRecord& b) {
    return a.epoch != b.epoch ? a.epoch < b.epoch : a.shard < b.shard;
  });
  return m;
}

Status write_checkpoint_mirror(const CheckpointMirror& m) {
  return write_file_durably(mirror_path(m.manifest.dir), encode_mirror(m), "checkpoint manifest");
}

Expected<CheckpointMirror> read_checkpoint_mirror(const std::string& path) {
  auto bytes = read_whole_file(path, "checkpoint manifest", size_t{64} << 20);
  if (!bytes.ok()) return bytes.status();
  CheckpointMirror m;
  TROUPE_RETURN_IF_ERROR(decode_mirror(*bytes, path, &m));
  return m;
}

}  // namespace troupe::gcs
