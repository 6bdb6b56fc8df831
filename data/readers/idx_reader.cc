#include "data/readers/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <regex>
#include <vector>

namespace troupe::data {

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads up to n bytes; the count read, or an error naming the file.
Expected<size_t> read_some(gzFile f, uint8_t* dst, size_t n, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const unsigned ask = static_cast<unsigned>(std::min<size_t>(n - got, size_t{1} << 30));
    const int r = gzread(f, dst + got, ask);
    if (r < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      return corrupt_data(path + ": corrupt or truncated gzip data: " + (msg ? msg : "unknown error"));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

bool looks_like_idx(const std::string& path) {
  static const std::regex re(R"(.*(-idx[0-9]-ubyte|\.idx[0-9])(\.gz)?$)");
  return std::regex_match(path, re);
}

Expected<Array> read_idx(const std::string& path) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) {
    if (errno == ENOENT) return not_found(path + ": no such file");
    return io_error(path + ": cannot open: " + std::strerror(errno));
  }
  uint8_t head[4];
  auto got = read_some(f.get(), head, 4, path);
  if (!got.ok()) return got.status();
  if (*got < 4 || head[0] != 0 || head[1] != 0)
    return corrupt_data(path + ": not an IDX file (it must start with two zero bytes, a type code and a rank)");
  ElemType type;
  switch (head[2]) {
    case 0x08: type = ElemType::u8; break;
    case 0x09: type = ElemType::i8; break;
    case 0x0B: type = ElemType::i16; break;
    case 0x0C: type = ElemType::i32; break;
    case 0x0D: type = ElemType::f32; break;
    case 0x0E: type = ElemType::f64; break;
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02X", head[2]);
      return corrupt_data(path + ": IDX type code " + code + " is not one of 0x08 0x09 0x0B 0x0C 0x0D 0x0E");
    }
  }
  const int rank = head[3];
  if (rank < 1) return corrupt_data(path + ": an IDX file of rank 0");
  std::vector<uint8_t> dims_raw(size_t(rank) * 4);
  got = read_some(f.get(), dims_raw.data(), dims_raw.size(), path);
  if (!got.ok()) return got.status();
  if (*got < dims_raw.size()) return corrupt_data(path + ": truncated IDX header");
  std::vector<int64_t> shape;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* p = dims_raw.data() + 4 * d;
    shape.push_back((int64_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]);
  }
  const int64_t elements = shape_product(shape);
  if (elements < 0) return corrupt_data(path + ": IDX dimensions too large");
  const size_t w = elem_size(type), need = static_cast<size_t>(elements) * w;
  std::vector<uint8_t> data;
  TROUPE_RETURN_IF_ERROR(read_claimed([&](uint8_t* dst, size_t n) { return read_some(f.get(), dst, n, path); }, need,
                                      &data, path + " (dimensions " + describe(type, shape) + ")"));
  uint8_t extra;
  got = read_some(f.get(), &extra, 1, path);
  if (!got.ok()) return got.status();
  if (*got != 0) return corrupt_data(path + ": bytes after the data the IDX dimensions describe");
  if (w > 1) {
    for (size_t i = 0; i < need; i += w) std::reverse(data.begin() + i, data.begin() + i + w);
  }
  return owned_array(type, std::move(shape), std::move(data));
}

}  // namespace troupe::data
