// The IDX format of (Fashion-)MNIST, gzip-compressed or not: two zero bytes, a type code (0x08 u8,
// 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64), the number of dimensions, each dimension as a
// big-endian u32, then the big-endian elements. Read whole into memory (converted to native
// order). Errors name the file: a bad magic or type code, a truncated or corrupt gzip stream,
// fewer or more bytes than the dimensions describe.
#pragma once

#include <string>

#include "core/status.h"
#include "data/array.h"

namespace troupe::data {

Expected<Array> read_idx(const std::string& path);

// Whether the name looks like an IDX file: *-idxN-ubyte or *.idxN, optionally .gz.
bool looks_like_idx(const std::string& path);

}  // namespace troupe::data
