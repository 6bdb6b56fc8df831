// Fashion-MNIST loader: the real files of Debian's dataset-fashion-mnist, and every way a file can be
// missing or broken. Broken files are generated in a fresh temporary directory per test.
#include "data/readers/fashion_mnist.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include <sys/resource.h>

#include "core/config.h"
#include "tests/data/idx_writer.h"

namespace troupe {
namespace {

using testing::idx_bytes;
using testing::TempDir;
using testing::write_gz;
using testing::write_small_dataset;

const std::string kRealDir = TROUPE_DEFAULT_DATASET_DIR;

uint64_t raw_pixel_sum(const Dataset& ds) {
  uint64_t sum = 0;
  for (float x : ds.images) sum += static_cast<uint64_t>(std::lround(x * 255.0f));
  return sum;
}

void check_real_split(Split split, int64_t count, uint64_t pixel_sum, const std::vector<int>& first_labels) {
  auto start = std::chrono::steady_clock::now();
  auto ds = load_fashion_mnist(kRealDir, split);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("load took " << seconds << " s");
  REQUIRE(ds.ok());
  if (!ds.ok()) return;
  CHECK(ds->count == count);
  CHECK(ds->rows == 28);
  CHECK(ds->cols == 28);
  CHECK(ds->classes == 10);
  CHECK(ds->features() == 784);
  REQUIRE(ds->images.size() == static_cast<size_t>(count) * 784);
  REQUIRE(ds->labels.size() == static_cast<size_t>(count));

  std::vector<int64_t> histogram(10, 0);
  for (int32_t l : ds->labels) {
    REQUIRE(l >= 0);
    REQUIRE(l < 10);
    ++histogram[static_cast<size_t>(l)];
  }
  for (int c = 0; c < 10; ++c) CHECK(histogram[static_cast<size_t>(c)] == count / 10);
  for (size_t i = 0; i < first_labels.size(); ++i) CHECK(ds->labels[i] == first_labels[i]);

  auto [lo, hi] = std::minmax_element(ds->images.begin(), ds->images.end());
  CHECK(*lo == 0.0f);
  CHECK(*hi == 1.0f);
  // Every pixel is exactly k / 255 for its byte k, so the bytes' sum comes back exactly.
  CHECK(raw_pixel_sum(*ds) == pixel_sum);
}

}  // namespace

TEST_CASE("fashion_mnist: real training split", "[fashion][real]") {
  check_real_split(Split::train, 60000, 3431114169ull, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
}

TEST_CASE("fashion_mnist: real test split", "[fashion][real]") {
  check_real_split(Split::test, 10000, 573469082ull, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
}

TEST_CASE("fashion_mnist: loading is deterministic", "[fashion][real]") {
  auto a = load_fashion_mnist(kRealDir, Split::test);
  auto b = load_fashion_mnist(kRealDir, Split::test);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->images == b->images);
  CHECK(a->labels == b->labels);
}

TEST_CASE("fashion_mnist: the dataset_dir setting defaults to the Debian package", "[fashion]") {
  Config c;
  CHECK(c.dataset_dir == kRealDir);
  CHECK(std::string(split_name(Split::train)) == "train");
  CHECK(std::string(split_name(Split::test)) == "t10k");
}

TEST_CASE("fashion_mnist: a small generated dataset loads exactly", "[fashion]") {
  TempDir tmp;
  write_small_dataset(tmp.path(), "t10k", 23, 3, 2);
  auto ds = load_fashion_mnist(tmp.path(), Split::test);
  REQUIRE(ds.ok());
  CHECK(ds->count == 23);
  CHECK(ds->rows == 3);
  CHECK(ds->cols == 2);
  REQUIRE(ds->images.size() == 23u * 6u);
  for (size_t i = 0; i < 23; ++i) {
    CHECK(ds->labels[i] == static_cast<int32_t>(i % 10));
    for (size_t p = 0; p < 6; ++p) {
      CHECK(ds->images[i * 6 + p] == static_cast<float>((i * 7 + p) % 256) / 255.0f);
    }
  }
}

TEST_CASE("fashion_mnist: a concatenated multi-member gzip file is read whole", "[fashion]") {
  TempDir tmp;
  std::string path = tmp.file("labels.gz");
  std::string content = idx_bytes({5}, {1, 2, 3, 4, 5});
  write_gz(tmp.file("a.gz"), content.substr(0, 6));
  write_gz(tmp.file("b.gz"), content.substr(6));
  testing::write_file(path, testing::read_file(tmp.file("a.gz")) + testing::read_file(tmp.file("b.gz")));
  auto arr = read_idx_gz(path, 1);
  REQUIRE(arr.ok());
  CHECK(arr->dims == std::vector<int64_t>{5});
  CHECK(arr->data == std::vector<uint8_t>{1, 2, 3, 4, 5});
}

TEST_CASE("fashion_mnist: a gzip member boundary at the reader's 1 MiB input chunk edge", "[fashion]") {
  // Member A is stored uncompressed (level 0) and sized so that its last byte is byte 2^20 - 1 of
  // the file: the next member's two magic bytes then straddle two reads of the input.
  TempDir tmp;
  const size_t chunk = size_t{1} << 20;
  const uint32_t count = 1100000;
  std::vector<uint8_t> labels(count);
  for (size_t i = 0; i < count; ++i) labels[i] = static_cast<uint8_t>(i * 13);
  std::string content = idx_bytes({count}, labels);
  auto stored = [&](size_t n) {
    gzFile f = gzopen(tmp.file("a.gz").c_str(), "wb0");
    REQUIRE(f);
    REQUIRE(gzwrite(f, content.data(), static_cast<unsigned>(n)) == static_cast<int>(n));
    REQUIRE(gzclose(f) == Z_OK);
    return testing::read_file(tmp.file("a.gz"));
  };
  // Stored size grows one byte per input byte, plus a few per block: home in on the target.
  size_t split = chunk - 1000;
  std::string a = stored(split);
  for (int tries = 0; tries < 64 && a.size() != chunk - 1; ++tries) {
    long long off = static_cast<long long>(chunk - 1) - static_cast<long long>(a.size());
    split = static_cast<size_t>(static_cast<long long>(split) + (off == 0 ? 0 : (tries < 8 ? off : (off > 0 ? 1 : -1))));
    a = stored(split);
  }
  REQUIRE(a.size() == chunk - 1);
  write_gz(tmp.file("b.gz"), content.substr(split));
  testing::write_file(tmp.file("labels.gz"), a + testing::read_file(tmp.file("b.gz")));
  auto arr = read_idx_gz(tmp.file("labels.gz"), 1);
  REQUIRE(arr.ok());
  CHECK(arr->data == labels);
}

// ---- bad input: each asserts the code and that the message names the file ----

TEST_CASE("fashion_mnist: missing directory is not_found naming the file and the fix", "[fashion][errors]") {
  TempDir tmp;
  std::string dir = tmp.file("no-such-dir");
  auto ds = load_fashion_mnist(dir, Split::train);
  REQUIRE_FALSE(ds.ok());
  CHECK(ds.status().code() == Code::not_found);
  CHECK_THAT(ds.status().message(), Catch::Contains(dir + "/train-images-idx3-ubyte.gz"));
  CHECK_THAT(ds.status().message(), Catch::Contains("dataset-fashion-mnist"));
  CHECK_THAT(ds.status().message(), Catch::Contains("dataset_dir"));
}

TEST_CASE("fashion_mnist: missing label file is not_found naming it", "[fashion][errors]") {
  TempDir tmp;
  write_small_dataset(tmp.path(), "train", 4);
  std::filesystem::remove(tmp.file("train-labels-idx1-ubyte.gz"));
  auto ds = load_fashion_mnist(tmp.path(), Split::train);
  REQUIRE_FALSE(ds.ok());
  CHECK(ds.status().code() == Code::not_found);
  CHECK_THAT(ds.status().message(), Catch::Contains(tmp.file("train-labels-idx1-ubyte.gz")));
}

TEST_CASE("fashion_mnist: a directory in place of the file is io_error", "[fashion][errors]") {
  TempDir tmp;
  std::filesystem::create_directory(tmp.file("x.gz"));
  auto arr = read_idx_gz(tmp.file("x.gz"), 1);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::io_error);
  CHECK_THAT(arr.status().message(), Catch::Contains(tmp.file("x.gz")));
}

TEST_CASE("fashion_mnist: truncated gzip is corrupt_data, never partial data", "[fashion][errors]") {
  TempDir tmp;
  std::string path = tmp.file("t10k-labels-idx1-ubyte.gz");
  std::string whole = testing::read_file(kRealDir + "/t10k-labels-idx1-ubyte.gz");
  REQUIRE(whole.size() > 100);

  SECTION("cut in the middle of the deflate data") {
    testing::write_file(path, whole.substr(0, whole.size() / 2));
  }
  SECTION("only the 8-byte trailer (CRC and length) missing: all data present") {
    testing::write_file(path, whole.substr(0, whole.size() - 8));
  }
  SECTION("last byte missing") {
    testing::write_file(path, whole.substr(0, whole.size() - 1));
  }
  SECTION("empty file") {
    testing::write_file(path, "");
  }
  auto arr = read_idx_gz(path, 1);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::corrupt_data);
  CHECK_THAT(arr.status().message(), Catch::Contains(path));
  CHECK_THAT(arr.status().message(), Catch::Contains("truncated") || Catch::Contains("ends early"));
}

TEST_CASE("fashion_mnist: corrupt gzip bytes are corrupt_data", "[fashion][errors]") {
  TempDir tmp;
  std::string path = tmp.file("t10k-images-idx3-ubyte.gz");
  std::string bytes = testing::read_file(kRealDir + "/t10k-images-idx3-ubyte.gz");
  size_t mid = bytes.size() / 2;
  for (size_t i = 0; i < 16; ++i) bytes[mid + i] = static_cast<char>(~bytes[mid + i]);
  testing::write_file(path, bytes);
  auto arr = read_idx_gz(path, 3);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::corrupt_data);
  CHECK_THAT(arr.status().message(), Catch::Contains(path));
}

TEST_CASE("fashion_mnist: a bad gzip CRC is corrupt_data", "[fashion][errors]") {
  TempDir tmp;
  std::string path = tmp.file("labels.gz");
  write_gz(path, idx_bytes({4}, {1, 2, 3, 4}));
  std::string bytes = testing::read_file(path);
  bytes[bytes.size() - 8] = static_cast<char>(bytes[bytes.size() - 8] ^ 0x5a);  // first CRC byte
  testing::write_file(path, bytes);
  auto arr = read_idx_gz(path, 1);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::corrupt_data);
  CHECK_THAT(arr.status().message(), Catch::Contains(path));
  CHECK_THAT(arr.status().message(), Catch::Contains("incorrect data check"));
}

TEST_CASE("fashion_mnist: a file that is not gzip is corrupt_data", "[fashion][errors]") {
  TempDir tmp;
  std::string path = tmp.file("labels.gz");
  testing::write_file(path, idx_bytes({4}, {1, 2, 3, 4}));  // raw IDX, never compressed
  auto arr = read_idx_gz(path, 1);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::corrupt_data);
  CHECK_THAT(arr.status().message(), Catch::Contains(path));
}

TEST_CASE("fashion_mnist: garbage after the gzip stream is corrupt_data", "[fashion][errors]") {
  TempDir tmp;
  std::string path = tmp.file("labels.gz");
  write_gz(path, idx_bytes({4}, {1, 2, 3, 4}));
  testing::write_file(path, testing::read_file(path) + std::string(3, '\0'));
  auto arr = read_idx_gz(path, 1);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::corrupt_data);
  CHECK_THAT(arr.status().message(), Catch::Contains(path));
}

TEST_CASE("fashion_mnist: wrong IDX magic is corrupt_data", "[fashion][errors]") {
  TempDir tmp;
  std::string path = tmp.file("labels.gz");
  SECTION("nonzero leading bytes") { write_gz(path, idx_bytes({4}, {1, 2, 3, 4}, 0x12340801u)); }
  SECTION("element type float (0x0d) instead of unsigned byte") {
    write_gz(path, idx_bytes({4}, {1, 2, 3, 4}, 0x00000d01u));
  }
  auto arr = read_idx_gz(path, 1);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::corrupt_data);
  CHECK_THAT(arr.status().message(), Catch::Contains(path));
  CHECK_THAT(arr.status().message(), Catch::Contains("magic"));
}

TEST_CASE("fashion_mnist: wrong IDX rank is corrupt_data", "[fashion][errors]") {
  TempDir tmp;
  write_small_dataset(tmp.path(), "train", 4);
  // Put a rank-1 (label-shaped) file where the rank-3 images belong.
  write_gz(tmp.file("train-images-idx3-ubyte.gz"), idx_bytes({4}, {0, 1, 2, 3}));
  auto ds = load_fashion_mnist(tmp.path(), Split::train);
  REQUIRE_FALSE(ds.ok());
  CHECK(ds.status().code() == Code::corrupt_data);
  CHECK_THAT(ds.status().message(), Catch::Contains(tmp.file("train-images-idx3-ubyte.gz")));
  CHECK_THAT(ds.status().message(), Catch::Contains("rank 1"));
}

TEST_CASE("fashion_mnist: image and label counts must match", "[fashion][errors]") {
  TempDir tmp;
  write_small_dataset(tmp.path(), "train", 5);
  write_gz(tmp.file("train-labels-idx1-ubyte.gz"), idx_bytes({4}, {0, 1, 2, 3}));
  auto ds = load_fashion_mnist(tmp.path(), Split::train);
  REQUIRE_FALSE(ds.ok());
  CHECK(ds.status().code() == Code::corrupt_data);
  CHECK_THAT(ds.status().message(), Catch::Contains(tmp.file("train-labels-idx1-ubyte.gz")));
  CHECK_THAT(ds.status().message(), Catch::Contains("4 labels"));
  CHECK_THAT(ds.status().message(), Catch::Contains("5 images"));
}

TEST_CASE("fashion_mnist: a label >= 10 is corrupt_data", "[fashion][errors]") {
  TempDir tmp;
  write_small_dataset(tmp.path(), "t10k", 4);
  write_gz(tmp.file("t10k-labels-idx1-ubyte.gz"), idx_bytes({4}, {0, 1, 10, 3}));
  auto ds = load_fashion_mnist(tmp.path(), Split::test);
  REQUIRE_FALSE(ds.ok());
  CHECK(ds.status().code() == Code::corrupt_data);
  CHECK_THAT(ds.status().message(), Catch::Contains(tmp.file("t10k-labels-idx1-ubyte.gz")));
  CHECK_THAT(ds.status().message(), Catch::Contains("label 10 of example 2"));
}

TEST_CASE("fashion_mnist: data bytes must match the header exactly", "[fashion][errors]") {
  TempDir tmp;
  std::string path = tmp.file("labels.gz");
  SECTION("trailing bytes") {
    write_gz(path, idx_bytes({4}, {1, 2, 3, 4, 5}));
    auto arr = read_idx_gz(path, 1);
    REQUIRE_FALSE(arr.ok());
    CHECK(arr.status().code() == Code::corrupt_data);
    CHECK_THAT(arr.status().message(), Catch::Contains(path));
    CHECK_THAT(arr.status().message(), Catch::Contains("trailing"));
  }
  SECTION("too few bytes") {
    write_gz(path, idx_bytes({4}, {1, 2, 3}));
    auto arr = read_idx_gz(path, 1);
    REQUIRE_FALSE(arr.ok());
    CHECK(arr.status().code() == Code::corrupt_data);
    CHECK_THAT(arr.status().message(), Catch::Contains(path));
    CHECK_THAT(arr.status().message(), Catch::Contains("3 of 4 bytes"));
  }
  SECTION("header cut inside the dimensions") {
    write_gz(path, idx_bytes({}, {}, 0x00000803u) + std::string(5, '\0'));
    auto arr = read_idx_gz(path, 3);
    REQUIRE_FALSE(arr.ok());
    CHECK(arr.status().code() == Code::corrupt_data);
    CHECK_THAT(arr.status().message(), Catch::Contains(path));
  }
  SECTION("a header announcing 1 GiB over a few bytes of data fails without filling memory") {
    write_gz(path, idx_bytes({1024, 1024, 1024}, {1, 2, 3}));
    auto arr = read_idx_gz(path, 3);
    REQUIRE_FALSE(arr.ok());
    CHECK(arr.status().code() == Code::corrupt_data);
    CHECK_THAT(arr.status().message(), Catch::Contains(path));
    CHECK_THAT(arr.status().message(), Catch::Contains("3 of 1073741824 bytes"));
    // Peak resident memory stays far below the announced gigabyte (the real-data tests in the
    // same process peak near 250 MB).
    struct rusage usage;
    REQUIRE(getrusage(RUSAGE_SELF, &usage) == 0);
    CHECK(usage.ru_maxrss < 700 * 1024);  // kilobytes
  }
  SECTION("dimensions too large to be real, without allocating them") {
    write_gz(path, idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu}, {}));
    auto arr = read_idx_gz(path, 3);
    REQUIRE_FALSE(arr.ok());
    CHECK(arr.status().code() == Code::corrupt_data);
    CHECK_THAT(arr.status().message(), Catch::Contains(path));
    CHECK_THAT(arr.status().message(), Catch::Contains("implausibly large"));
  }
}

TEST_CASE("fashion_mnist: a bad expected rank is invalid_argument", "[fashion][errors]") {
  auto arr = read_idx_gz(kRealDir + "/t10k-labels-idx1-ubyte.gz", 0);
  REQUIRE_FALSE(arr.ok());
  CHECK(arr.status().code() == Code::invalid_argument);
}

}  // namespace troupe
