// The safetensors format (what PyTorch, JAX and Hugging Face load): an 8-byte little-endian header
// length N, N bytes of JSON mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
// end)} (offsets into the data that follows) plus an optional "__metadata__" map of strings to
// strings, then the little-endian row-major data. Tensors are written in name order, packed
// back to back, the header padded with spaces to a multiple of 8 bytes.
//
// Reading checks everything before any tensor is handed out (nothing loads half): the header length
// against the file and a 100 MB limit, valid JSON of the right shape, a known dtype (F64 F32 F16
// BF16 I64 I32 I16 I8 U8 BOOL), offsets in order, without gaps or overlaps, covering the data
// exactly, and each tensor's byte count = product(shape) x its dtype's size. Errors name the file
// and the tensor.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/array.h"

namespace troupe::data {

struct NamedTensor {
  std::string name;
  std::string dtype;  // the safetensors name: "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian
};

struct TensorFile {
  std::vector<NamedTensor> tensors;  // in file (offset) order
  std::map<std::string, std::string> metadata;
  const NamedTensor* find(const std::string& name) const;
};

// Bytes per element of a safetensors dtype, 0 for an unknown one.
size_t safetensors_dtype_size(const std::string& dtype);

// Writes `file` to `path` durably (temp + fsync + rename): the tensors in name order.
Status write_safetensors(const std::string& path, const TensorFile& file);

// A tensor's entry in a header: name, dtype and shape (its bytes follow from them).
struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};
// The first bytes of a file of `tensors` (the length and the padded JSON header) and where each
// tensor's data starts relative to the data's start (`offsets`, in the order given; the tensors
// are laid out in name order). invalid_argument naming `path` and the tensor for an unknown dtype,
// a negative dimension, a reserved or empty name. `data_bytes` receives the data's length.
Expected<std::string> safetensors_header(const std::string& path, const std::vector<TensorSpec>& tensors,
                                         const std::map<std::string, std::string>& metadata,
                                         std::vector<uint64_t>* offsets, uint64_t* data_bytes);

// Reads and checks the whole file.
Expected<TensorFile> read_safetensors(const std::string& path);

// The tensor's values as f32 (F32, F16, BF16 and F64 converted); integer and bool tensors are
// refused (parameters are floating point).
Expected<std::vector<float>> tensor_as_f32(const NamedTensor& t, const std::string& where);

}  // namespace troupe::data
