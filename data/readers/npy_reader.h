// NumPy's .npy format (format versions 1.0, 2.0 and 3.0): a magic string, a little-endian header
// length, a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}, then
// the elements. Read memory-mapped when the data is little-endian (or single bytes); big-endian
// data is byte-swapped into memory. Supported element types: u1 i1 u2 i2 u4 i4 i8 f2 f4 f8 and
// b1 (read as u8). Refused with a clear error, naming the file: a bad magic or version, a
// truncated or garbled header, fortran_order arrays, structured, complex, string or object dtypes,
// and data shorter or longer than the header's shape.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "data/array.h"

namespace troupe::data {

// The array in the .npy bytes p[0, n), whose lifetime `keep` extends; `where` names them in errors.
Expected<Array> parse_npy(std::shared_ptr<const void> keep, const uint8_t* p, size_t n, const std::string& where);

// The array of the .npy file at `path`, memory-mapped where it can be.
Expected<Array> read_npy(const std::string& path);

}  // namespace troupe::data
