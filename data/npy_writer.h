// A .npy file as NumPy writes it (format 1.0: the magic, a little-endian header length, a Python
// dict literal padded to a multiple of 64 bytes, then the data in C order), for outputs such as
// `troupe predict`'s. f32 only; written durably (temp + fsync + rename).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::data {

// The header of an f32 .npy file of shape `shape` (what precedes the data; a multiple of 64 bytes).
std::string npy_header(const std::vector<int64_t>& shape);

// The bytes of a .npy file of `values` (product(shape) of them) of shape `shape`.
std::string npy_bytes(const float* values, const std::vector<int64_t>& shape);

Status write_npy(const std::string& path, const float* values, const std::vector<int64_t>& shape);

}  // namespace troupe::data
