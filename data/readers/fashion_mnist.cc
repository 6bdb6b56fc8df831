// Fashion-MNIST loader: a streaming gzip reader over zlib's inflate, an IDX header parser, and the
// checks that turn a damaged or foreign file into an error naming the file instead of bad data.
#include "data/readers/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <sys/mman.h>
#include <sys/stat.h>

namespace troupe {
namespace {

// Largest decompressed payload accepted (the real training images are 47 MB).
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 30;
// The data buffer grows by this much as decompressed bytes actually arrive, so a damaged header
// announcing a gigabyte costs no more memory than the data present.
constexpr size_t kDataStep = size_t{8} << 20;
constexpr size_t kChunk = size_t{1} << 20;  // compressed bytes read from disk per fread

const char* kInstallHint =
    "install the Debian package dataset-fashion-mnist or set dataset_dir (TROUPE_DATASET_DIR) to a "
    "directory holding the Fashion-MNIST *-idx?-ubyte.gz files";
const char* kDamagedHint =
    "the file is damaged or not a Fashion-MNIST file: reinstall it (apt-get install --reinstall "
    "dataset-fashion-mnist) or download it again";

Status damaged(const std::string& path, const std::string& what) {
  return corrupt_data(path + ": " + what + "; " + kDamagedHint);
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// Decompresses one gzip file (possibly several concatenated gzip members) as a byte stream.
// Every error is corrupt_data or io_error naming the file; after an error the reader is unusable.
class GzipReader {
 public:
  GzipReader() = default;
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;
  ~GzipReader() {
    if (inflating_) inflateEnd(&zs_);
  }

  // Opens `path`: not_found when it does not exist, io_error when it cannot be read.
  Status open(const std::string& path) {
    path_ = path;
    errno = 0;
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) {
      int err = errno;
      if (err == ENOENT || err == ENOTDIR) return not_found(path + ": no such file; " + kInstallHint);
      return io_error(path + ": cannot open: " + std::strerror(err) + "; check its permissions or " +
                      kInstallHint);
    }
    struct stat st;
    if (fstat(fileno(file_.get()), &st) == 0 && S_ISDIR(st.st_mode)) {
      return io_error(path + ": is a directory, not a gzip file; " + kInstallHint);
    }
    in_.reset(new unsigned char[kChunk]);
    std::memset(&zs_, 0, sizeof zs_);
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {  // 16+: gzip wrapper only, CRC checked
      return io_error(path + ": zlib inflateInit2 failed (out of memory?)");
    }
    inflating_ = true;
    return {};
  }

  // Reads up to `n` bytes into `dst`; `*got` is fewer than `n` only at the proper end of the last
  // gzip member. A stream that stops before its end (truncated file), corrupt deflate data, a bad
  // CRC or length, or anything but another gzip member after a member's end is corrupt_data.
  Status read(void* dst, size_t n, size_t* got) {
    *got = 0;
    zs_.next_out = static_cast<Bytef*>(dst);
    while (*got < n && !finished_) {
      size_t want = n - *got;
      zs_.avail_out = static_cast<uInt>(want < (size_t{1} << 30) ? want : (size_t{1} << 30));
      uInt before = zs_.avail_out;
      if (zs_.avail_in == 0) {
        TROUPE_RETURN_IF_ERROR(fill());
        if (zs_.avail_in == 0) {
          return damaged(path_, "truncated gzip stream: the file ends before the gzip trailer");
        }
      }
      int rc = inflate(&zs_, Z_NO_FLUSH);
      *got += before - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        TROUPE_RETURN_IF_ERROR(next_member());
      } else if (rc == Z_DATA_ERROR) {
        return damaged(path_, std::string("corrupt gzip data (") + (zs_.msg ? zs_.msg : "zlib data error") + ")");
      } else if (rc == Z_MEM_ERROR) {
        return io_error(path_ + ": out of memory while decompressing");
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return damaged(path_, "gzip decompression failed (zlib code " + std::to_string(rc) + ")");
      }
    }
    return {};
  }

 private:
  // Reads more of the file until at least `min_bytes` unread input bytes are buffered or the file
  // ends; at end of file avail_in may stay below `min_bytes` (0 when everything was consumed).
  Status fill(size_t min_bytes = 1) {
    while (zs_.avail_in < min_bytes && !eof_) {
      size_t kept = zs_.avail_in;
      if (kept) std::memmove(in_.get(), zs_.next_in, kept);
      size_t k = std::fread(in_.get() + kept, 1, kChunk - kept, file_.get());
      if (k < kChunk - kept) {
        if (std::ferror(file_.get())) {
          return io_error(path_ + ": read failed: " + std::strerror(errno) + "; check the disk and the file");
        }
        eof_ = true;
      }
      zs_.next_in = in_.get();
      zs_.avail_in = static_cast<uInt>(kept + k);
    }
    return {};
  }

  // After a member's end: the file ends (finished), or another gzip member follows.
  Status next_member() {
    TROUPE_RETURN_IF_ERROR(fill(2));
    if (zs_.avail_in == 0) {
      finished_ = true;
      return {};
    }
    if (zs_.avail_in < 2 || zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b) {
      return damaged(path_, "unexpected bytes after the end of the gzip stream");
    }
    inflateReset(&zs_);
    return {};
  }

  std::string path_;
  std::unique_ptr<FILE, FileCloser> file_;
  std::unique_ptr<unsigned char[]> in_;
  z_stream zs_{};
  bool inflating_ = false;
  bool eof_ = false;
  bool finished_ = false;
};

// Reads exactly `n` bytes or fails naming `what` was cut short.
Status read_exact(GzipReader& gz, const std::string& path, void* dst, size_t n, const char* what) {
  size_t got = 0;
  TROUPE_RETURN_IF_ERROR(gz.read(dst, n, &got));
  if (got != n) {
    return damaged(path, std::string("the decompressed file ends early, in the ") + what + " (" +
                             std::to_string(got) + " of " + std::to_string(n) + " bytes present)");
  }
  return {};
}

// Reserves room for `n` elements, asking the kernel to back it with huge pages: first-touch page
// faults of a 188 MB float buffer otherwise cost more than decompressing the whole file.
template <class T>
void reserve_large(std::vector<T>& v, size_t n) {
  v.reserve(n);
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  uintptr_t begin = (reinterpret_cast<uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(v.data() + n) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint only
#endif
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

Expected<IdxArray> read_idx_gz(const std::string& path, int expected_rank) {
  if (expected_rank < 1 || expected_rank > 255) {
    return invalid_argument("read_idx_gz(" + path + "): expected rank " + std::to_string(expected_rank) +
                            " is not in 1..255");
  }
  GzipReader gz;
  TROUPE_RETURN_IF_ERROR(gz.open(path));

  // Header: two zero bytes, the element type (0x08: unsigned byte), the rank; then one big-endian
  // uint32 per dimension.
  std::array<uint8_t, 4> magic{};
  TROUPE_RETURN_IF_ERROR(read_exact(gz, path, magic.data(), 4, "IDX header"));
  uint32_t magic_value = (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) | (uint32_t{magic[2]} << 8) | magic[3];
  uint32_t expected_magic = 0x0800u | static_cast<uint32_t>(expected_rank);
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08) {
    return damaged(path, "wrong IDX magic " + hex32(magic_value) + " (expected " + hex32(expected_magic) +
                             ": unsigned bytes of rank " + std::to_string(expected_rank) + ")");
  }
  if (magic[3] != expected_rank) {
    return damaged(path, "IDX rank " + std::to_string(magic[3]) + " (magic " + hex32(magic_value) +
                             "), expected rank " + std::to_string(expected_rank) + " (magic " +
                             hex32(expected_magic) + ")");
  }

  IdxArray out;
  std::vector<uint8_t> dim_bytes(4 * static_cast<size_t>(expected_rank));
  TROUPE_RETURN_IF_ERROR(read_exact(gz, path, dim_bytes.data(), dim_bytes.size(), "IDX dimensions"));
  uint64_t total = 1;
  for (int i = 0; i < expected_rank; ++i) {
    const uint8_t* b = &dim_bytes[4 * static_cast<size_t>(i)];
    uint64_t d = (uint64_t{b[0]} << 24) | (uint64_t{b[1]} << 16) | (uint64_t{b[2]} << 8) | b[3];
    out.dims.push_back(static_cast<int64_t>(d));
    // total <= kMaxIdxBytes (2^30) and d < 2^32 here, so the product cannot overflow 64 bits.
    total *= d;
    if (total > kMaxIdxBytes) {
      return damaged(path, "IDX dimensions are implausibly large (more than " + std::to_string(kMaxIdxBytes) +
                               " bytes); dimension " + std::to_string(i) + " is " + std::to_string(d));
    }
  }

  // Reserve address space for all of it (untouched, so free), but fill it step by step.
  try {
    reserve_large(out.data, static_cast<size_t>(total));
  } catch (const std::bad_alloc&) {
    return io_error(path + ": cannot allocate " + std::to_string(total) + " bytes for its data; free some memory");
  }
  while (out.data.size() < total) {
    size_t have = out.data.size();
    size_t step = static_cast<size_t>(std::min<uint64_t>(kDataStep, total - have));
    out.data.resize(have + step);
    size_t got = 0;
    TROUPE_RETURN_IF_ERROR(gz.read(out.data.data() + have, step, &got));
    if (got != step) {
      return damaged(path, "the decompressed file ends early, in the IDX data (" + std::to_string(have + got) +
                               " of " + std::to_string(total) + " bytes present)");
    }
  }

  // Nothing may follow the data, and the gzip stream must end properly (trailer and CRC checked).
  uint8_t extra[64];
  size_t got = 0;
  TROUPE_RETURN_IF_ERROR(gz.read(extra, sizeof extra, &got));
  if (got != 0) {
    return damaged(path, "trailing bytes after the " + std::to_string(total) +
                             " data bytes that the IDX header announces");
  }
  return out;
}

const char* split_name(Split split) { return split == Split::train ? "train" : "t10k"; }

FashionMnistFiles fashion_mnist_files(const std::string& dir, Split split) {
  const std::string prefix = (dir.empty() ? std::string(".") : dir) + "/" + split_name(split);
  return {prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz"};
}

Expected<Dataset> load_fashion_mnist(const std::string& dir, Split split) {
  const FashionMnistFiles files = fashion_mnist_files(dir, split);
  const std::string& images_path = files.images;
  const std::string& labels_path = files.labels;

  struct stat st;
  if (!dir.empty() && ::stat(dir.c_str(), &st) != 0) {
    return not_found(images_path + ": dataset directory '" + dir + "' does not exist; " + kInstallHint);
  }

  auto images = read_idx_gz(images_path, 3);
  if (!images.ok()) return images.status();
  auto labels = read_idx_gz(labels_path, 1);
  if (!labels.ok()) return labels.status();

  Dataset ds;
  ds.count = images->dims[0];
  if (labels->dims[0] != ds.count) {
    return corrupt_data(labels_path + ": holds " + std::to_string(labels->dims[0]) + " labels but " + images_path +
                        " holds " + std::to_string(ds.count) + " images; the two files must come from the same "
                        "split and release: " + kDamagedHint);
  }
  if (images->dims[1] > 65535 || images->dims[2] > 65535) {
    return damaged(images_path, "image size " + std::to_string(images->dims[1]) + " x " +
                                    std::to_string(images->dims[2]) + " is implausible");
  }
  if (ds.count == 0 || images->dims[1] == 0 || images->dims[2] == 0) {
    return damaged(images_path, "holds no pixels (dimensions " + std::to_string(images->dims[0]) + " x " +
                                    std::to_string(images->dims[1]) + " x " + std::to_string(images->dims[2]) + ")");
  }
  ds.rows = static_cast<int>(images->dims[1]);
  ds.cols = static_cast<int>(images->dims[2]);

  ds.labels.resize(static_cast<size_t>(ds.count));
  for (size_t i = 0; i < ds.labels.size(); ++i) {
    uint8_t l = labels->data[i];
    if (l >= ds.classes) {
      return damaged(labels_path, "label " + std::to_string(l) + " of example " + std::to_string(i) +
                                      " is not a class in 0.." + std::to_string(ds.classes - 1));
    }
    ds.labels[i] = l;
  }

  // x / 255 through a table: exactly the correctly rounded quotient, and fast.
  float scale[256];
  for (int v = 0; v < 256; ++v) scale[v] = static_cast<float>(v) / 255.0f;
  const std::vector<uint8_t>& px = images->data;
  try {
    reserve_large(ds.images, px.size());
    ds.images.resize(px.size());
  } catch (const std::bad_alloc&) {
    return io_error(images_path + ": cannot allocate " + std::to_string(px.size() * sizeof(float)) +
                    " bytes for its pixels as floats; free some memory");
  }
  for (size_t i = 0; i < px.size(); ++i) ds.images[i] = scale[px[i]];
  return ds;
}

}  // namespace troupe
