// A safetensors file (data/safetensors.h) written piece by piece: the header first — every
// tensor's name, dtype and shape known up front — then any byte range of any tensor's data, in any
// order, at its place in the file. So a model is written without ever being whole in memory (a
// sharded job's layers one at a time, a checkpoint's shards one at a time). The file is built
// under a temporary name beside `path` and renamed over it by commit(), once every byte of data
// was written (fsync'd, then the directory): a failure or an abandoned writer leaves no file at
// `path` and removes the temporary one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/safetensors.h"

namespace troupe::data {

class SafetensorsWriter {
 public:
  // io_error naming the temporary file when it cannot be made; safetensors_header's errors.
  static Expected<std::unique_ptr<SafetensorsWriter>> create(const std::string& path, std::vector<TensorSpec> tensors,
                                                             const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // `size` bytes of tensor `index` (as given to create), from byte `at` of its data.
  // invalid_argument for a range outside the tensor; io_error naming the file.
  Status write(size_t index, uint64_t at, const void* data, size_t size);
  // Bytes per element of tensor `index`.
  size_t element_size(size_t index) const { return widths_[index]; }

  // Every byte of data written (counted; internal_error otherwise): flushed and renamed over `path`.
  Status commit();

 private:
  SafetensorsWriter() = default;

  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t data_start_ = 0, data_bytes_ = 0, written_ = 0;
  std::vector<uint64_t> offsets_, sizes_;
  std::vector<size_t> widths_;
};

}  // namespace troupe::data
