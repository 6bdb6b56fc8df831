#include "trainers/checkpoint/shard_file.h"

#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/durable_file.h"

namespace troupe::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'T', 'R', 'P', 'C', 'K', 'P', 'T', '1'};
constexpr size_t kFixedHeader = 8 * 3 + 4 * 2 + 8 * 4 + 4 * 3;  // the header before name and tag
constexpr size_t kMaxName = 64, kMaxTag = 256;

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T get(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

}  // namespace

std::string xxh64_hex(const void* data, size_t size) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(data, size, 0)));
  return hex;
}

Expected<WrittenShard> write_shard_file(const std::string& path, const ShardData& d) {
  const ShardHeader& h = d.header;
  const uint64_t n = h.end - h.begin;
  if (h.end < h.begin || h.end > h.total_floats || d.params.size() != n) {
    return invalid_argument("checkpoint shard " + path + ": range [" + std::to_string(h.begin) + ", " +
                            std::to_string(h.end) + ") of " + std::to_string(h.total_floats) + " floats with " +
                            std::to_string(d.params.size()) + " parameters");
  }
  for (const auto& v : d.optimizer.vectors) {
    if (v.size() != n) return invalid_argument("checkpoint shard " + path + ": an optimizer vector is not " + std::to_string(n) + " floats");
  }
  if (d.optimizer.name.size() > kMaxName || h.tag.size() > kMaxTag) {
    return invalid_argument("checkpoint shard " + path + ": optimizer name or tag too long");
  }
  if (d.extra.size() > kMaxShardExtra) {
    return invalid_argument("checkpoint shard " + path + ": " + std::to_string(d.extra.size()) +
                            " extra bytes; at most " + std::to_string(kMaxShardExtra));
  }
  std::string bytes(kMagic, sizeof kMagic);
  put<uint32_t>(bytes, kShardFormatVersion);
  put<uint32_t>(bytes, static_cast<uint32_t>(kFixedHeader + d.optimizer.name.size() + h.tag.size()));
  put<int64_t>(bytes, h.step);
  put<int64_t>(bytes, h.epoch);
  put<int64_t>(bytes, h.epoch_step);
  put<int32_t>(bytes, h.shard);
  put<int32_t>(bytes, h.shards);
  put<uint64_t>(bytes, h.total_floats);
  put<uint64_t>(bytes, h.begin);
  put<uint64_t>(bytes, h.end);
  put<int64_t>(bytes, d.optimizer.steps);
  put<uint32_t>(bytes, static_cast<uint32_t>(d.optimizer.vectors.size()));
  put<uint32_t>(bytes, static_cast<uint32_t>(d.optimizer.name.size()));
  put<uint32_t>(bytes, static_cast<uint32_t>(h.tag.size()));
  bytes += d.optimizer.name;
  bytes += h.tag;
  bytes.append(reinterpret_cast<const char*>(d.params.data()), n * sizeof(float));
  for (const auto& v : d.optimizer.vectors) bytes.append(reinterpret_cast<const char*>(v.data()), n * sizeof(float));
  put<uint64_t>(bytes, d.extra.size());
  bytes += d.extra;
  put<uint64_t>(bytes, XXH64(bytes.data(), bytes.size(), 0));

  TROUPE_RETURN_IF_ERROR(write_file_durably(path, bytes, "checkpoint shard"));
  return WrittenShard{path, bytes.size(), xxh64_hex(bytes.data(), bytes.size())};
}

namespace {

// What is wrong with a shard file's first 16 bytes (magic, a version this troupe reads; "" when
// nothing), its version into *version.
std::string prologue_defect(const char* b, uint32_t* version) {
  if (std::memcmp(b, kMagic, sizeof kMagic) != 0) return "bad magic (not a troupe checkpoint shard)";
  const char* p = b + 8;
  *version = get<uint32_t>(p);
  if (*version != 1 && *version != kShardFormatVersion)
    return "format version " + std::to_string(*version) + "; this troupe reads versions 1 to " +
           std::to_string(kShardFormatVersion);
  return "";
}

// The header's fixed fields from step to end, at p (advanced past them).
void get_position(const char*& p, ShardHeader* h) {
  h->step = get<int64_t>(p);
  h->epoch = get<int64_t>(p);
  h->epoch_step = get<int64_t>(p);
  h->shard = get<int32_t>(p);
  h->shards = get<int32_t>(p);
  h->total_floats = get<uint64_t>(p);
  h->begin = get<uint64_t>(p);
  h->end = get<uint64_t>(p);
}

// What is wrong with the header's range and shard number ("" when nothing).
std::string range_defect(const ShardHeader& h) {
  if (h.end >= h.begin && h.end <= h.total_floats && h.shard >= 0 && h.shard < h.shards) return "";
  return "header range [" + std::to_string(h.begin) + ", " + std::to_string(h.end) + ") of " +
         std::to_string(h.total_floats) + ", shard " + std::to_string(h.shard) + " of " + std::to_string(h.shards);
}

}  // namespace

Expected<ShardHeader> read_shard_header(const std::string& path) {
  auto corrupt = [&](const std::string& what) { return corrupt_data("checkpoint shard " + path + " is corrupt: " + what); };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int e = errno;
    if (e == ENOENT) return not_found("checkpoint shard " + path + " does not exist");
    return io_error("cannot open checkpoint shard " + path + ": " + std::strerror(e));
  }
  char b[16 + kFixedHeader];
  const size_t got = std::fread(b, 1, sizeof b, f);
  std::fclose(f);
  if (got != sizeof b) return corrupt("truncated to " + std::to_string(got) + " bytes");
  uint32_t version = 0;
  if (std::string defect = prologue_defect(b, &version); !defect.empty()) return corrupt(defect);
  const char* p = b + 16;  // past magic, version and the header's length
  ShardHeader h;
  get_position(p, &h);
  if (std::string defect = range_defect(h); !defect.empty()) return corrupt(defect);
  return h;
}

Expected<ShardData> read_shard_file(const std::string& path) {
  auto file = read_whole_file(path, "checkpoint shard");
  if (!file.ok()) return file.status();
  const std::string& b = *file;
  auto corrupt = [&](const std::string& what) { return corrupt_data("checkpoint shard " + path + " is corrupt: " + what); };
  if (b.size() < 16 + kFixedHeader + 8) return corrupt("truncated to " + std::to_string(b.size()) + " bytes");
  uint32_t version = 0;
  if (std::string defect = prologue_defect(b.data(), &version); !defect.empty()) return corrupt(defect);
  const char* p = b.data() + 12;
  const uint32_t header_bytes = get<uint32_t>(p);
  // The checksum first: after it every field is what the writer wrote.
  uint64_t stored;
  std::memcpy(&stored, b.data() + b.size() - 8, 8);
  if (XXH64(b.data(), b.size() - 8, 0) != stored) {
    return corrupt("checksum mismatch over its " + std::to_string(b.size()) + " bytes (damaged, or truncated)");
  }
  if (header_bytes < kFixedHeader || header_bytes > kFixedHeader + kMaxName + kMaxTag ||
      16 + header_bytes + 8 > b.size()) {
    return corrupt("header of " + std::to_string(header_bytes) + " bytes does not fit the file");
  }
  ShardData d;
  ShardHeader& h = d.header;
  get_position(p, &h);
  d.optimizer.steps = get<int64_t>(p);
  const uint32_t vectors = get<uint32_t>(p), name_len = get<uint32_t>(p), tag_len = get<uint32_t>(p);
  if (kFixedHeader + name_len + tag_len != header_bytes) return corrupt("header lengths disagree");
  d.optimizer.name.assign(p, name_len);
  p += name_len;
  h.tag.assign(p, tag_len);
  p += tag_len;
  if (std::string defect = range_defect(h); !defect.empty()) return corrupt(defect);
  if (vectors > 8) return corrupt(std::to_string(vectors) + " optimizer state vectors (at most 8)");
  const uint64_t n = h.end - h.begin;
  if (n > b.size() / sizeof(float) / (1 + vectors))  // (and the sums below cannot wrap)
    return corrupt("a range of " + std::to_string(n) + " floats in " + std::to_string(b.size()) + " bytes");
  const uint64_t payload_end = 16 + header_bytes + (1 + vectors) * n * sizeof(float);
  uint64_t extra = 0;
  if (version >= 2) {  // the extra's length follows the payload
    if (payload_end + 8 + 8 > b.size())
      return corrupt(std::to_string(b.size()) + " bytes; its header says at least " + std::to_string(payload_end + 16));
    std::memcpy(&extra, b.data() + payload_end, 8);
    if (extra > kMaxShardExtra) return corrupt("an extra record of " + std::to_string(extra) + " bytes");
  }
  const uint64_t want = payload_end + (version >= 2 ? 8 + extra : 0) + 8;
  if (want != b.size()) {
    return corrupt(std::to_string(b.size()) + " bytes; its header says " + std::to_string(want));
  }
  d.params.resize(n);
  std::memcpy(d.params.data(), p, n * sizeof(float));
  p += n * sizeof(float);
  for (uint32_t i = 0; i < vectors; ++i) {
    d.optimizer.vectors.emplace_back(n);
    std::memcpy(d.optimizer.vectors.back().data(), p, n * sizeof(float));
    p += n * sizeof(float);
  }
  if (version >= 2) d.extra.assign(p + 8, extra);
  return d;
}

Status verify_shard_file(const std::string& path, uint64_t bytes, const std::string& checksum) {
  auto file = read_whole_file(path, "checkpoint shard");
  if (!file.ok()) return file.status();
  if (file->size() != bytes) {
    return corrupt_data("checkpoint shard " + path + " has " + std::to_string(file->size()) +
                        " bytes; the manifest recorded " + std::to_string(bytes));
  }
  const std::string got = xxh64_hex(file->data(), file->size());
  if (got != checksum) {
    return corrupt_data("checkpoint shard " + path + " hashes to " + got + "; the manifest recorded " + checksum);
  }
  return {};
}

}  // namespace troupe::checkpoint
