// Fashion-MNIST from the IDX files in gzip that Debian's dataset-fashion-mnist installs
// (/usr/share/datasets/fashion-mnist): 60,000 training and 10,000 test images of 28 x 28 pixels in
// 10 classes. Loading is deterministic; every failure names the file and what is wrong with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/dataset.h"

namespace troupe {

// The decoded contents of one IDX file: its dimensions and raw unsigned bytes.
struct IdxArray {
  std::vector<int64_t> dims;   // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<uint8_t> data;   // product(dims) bytes
};

// Reads a gzip-compressed IDX file of unsigned bytes (type 0x08) with `expected_rank` dimensions.
// Errors: not_found (missing file), io_error (unreadable), corrupt_data (truncated or corrupt gzip,
// wrong magic, wrong rank, sizes that do not match the bytes present, trailing bytes).
Expected<IdxArray> read_idx_gz(const std::string& path, int expected_rank);

enum class Split { train, test };
const char* split_name(Split split);  // "train" or "t10k" (the IDX file prefix)

// The split's two files under `dir` ("." when empty): <dir>/<prefix>-images-idx3-ubyte.gz and
// <dir>/<prefix>-labels-idx1-ubyte.gz.
struct FashionMnistFiles {
  std::string images, labels;
};
FashionMnistFiles fashion_mnist_files(const std::string& dir, Split split);

// Loads <dir>/<prefix>-images-idx3-ubyte.gz and <dir>/<prefix>-labels-idx1-ubyte.gz. Beyond the
// read_idx_gz errors: corrupt_data when the image and label counts differ or a label is >= 10.
Expected<Dataset> load_fashion_mnist(const std::string& dir, Split split);

}  // namespace troupe
