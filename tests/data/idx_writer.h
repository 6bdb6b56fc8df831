// Test helpers: writers of small gzip'ed IDX files (well-formed or deliberately broken) for the
// Fashion-MNIST loader tests, and TempDir (tests/core/temp_dir.h) to hold them.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/core/temp_dir.h"

namespace troupe::testing {

// The bytes of an IDX file: magic 0x0000 08 <rank>, big-endian uint32 dimensions, then `data`.
// `magic` overrides the 4 magic bytes when non-zero.
inline std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                             uint32_t magic = 0) {
  if (magic == 0) magic = 0x0800u | static_cast<uint32_t>(dims.size());
  std::string out;
  auto put32 = [&out](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  put32(magic);
  for (uint32_t d : dims) put32(d);
  out.append(data.begin(), data.end());
  return out;
}

// Writes `content` gzip-compressed with zlib's gzopen(..., "wb").
inline void write_gz(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("gzopen failed for " + path);
  if (!content.empty() && gzwrite(f, content.data(), static_cast<unsigned>(content.size())) <= 0) {
    gzclose(f);
    throw std::runtime_error("gzwrite failed for " + path);
  }
  if (gzclose(f) != Z_OK) throw std::runtime_error("gzclose failed for " + path);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// A consistent little dataset in `dir` for split prefix `prefix` ("train" or "t10k"): `count`
// images of rows x cols with pixel (i, p) = (i * 7 + p) % 256, and label i % 10.
inline void write_small_dataset(const std::string& dir, const std::string& prefix, uint32_t count,
                                uint32_t rows = 3, uint32_t cols = 2) {
  std::vector<uint8_t> px(static_cast<size_t>(count) * rows * cols), labels(count);
  for (size_t i = 0; i < count; ++i) {
    labels[i] = static_cast<uint8_t>(i % 10);
    for (size_t p = 0; p < static_cast<size_t>(rows) * cols; ++p) {
      px[i * rows * cols + p] = static_cast<uint8_t>((i * 7 + p) % 256);
    }
  }
  write_gz(dir + "/" + prefix + "-images-idx3-ubyte.gz", idx_bytes({count, rows, cols}, px));
  write_gz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", idx_bytes({count}, labels));
}

}  // namespace troupe::testing
