// An n-dimensional array of one element type, read-only, over bytes someone keeps alive: a
// memory-mapped file (map_file) or an owned buffer. The first dimension counts examples when the
// array is a dataset's field (data/table.h); the rest is each example's shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/elem_type.h"

namespace troupe::data {

struct Array {
  ElemType type = ElemType::f32;
  std::vector<int64_t> shape;          // empty: a 0-d array (one element)
  std::shared_ptr<const void> keep;    // owns the bytes (a mapping or a buffer)
  const uint8_t* bytes = nullptr;      // elements() * elem_size(type) bytes, C order, native byte order

  int64_t elements() const;
  size_t byte_size() const { return static_cast<size_t>(elements()) * elem_size(type); }
  // As a field: examples (shape[0]; 1 for a 0-d array) and each example's shape and bytes.
  int64_t count() const { return shape.empty() ? 1 : shape[0]; }
  std::vector<int64_t> example_shape() const;
  int64_t example_elements() const;
  size_t example_bytes() const { return static_cast<size_t>(example_elements()) * elem_size(type); }
  const uint8_t* example(int64_t i) const { return bytes + static_cast<size_t>(i) * example_bytes(); }
  double value(size_t element) const { return elem_value(type, bytes + element * elem_size(type)); }
};

// "u8[28,28]" or "i32[]": a type and a per-example shape.
std::string describe(ElemType type, const std::vector<int64_t>& shape);

// An array over a buffer it takes.
Array owned_array(ElemType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes);

// A whole file mapped read-only (MAP_PRIVATE; an empty file maps to no bytes). not_found / io_error
// naming the path.
struct MappedFile {
  std::shared_ptr<const void> keep;
  const uint8_t* data = nullptr;
  size_t size = 0;
};
Expected<MappedFile> map_file(const std::string& path);

// The product of `shape`, or -1 when a dimension is negative or the product is over 2^56 elements
// (so that times any element size it fits a size_t: a header claiming more is damaged).
int64_t shape_product(const std::vector<int64_t>& shape);

// Reads `claimed` bytes through `read` (which returns how many it read, 0 at the end) into `out`,
// growing it as bytes arrive — never allocating what a damaged header claims before the data is
// there. corrupt_data naming `where` when fewer arrive.
Status read_claimed(const std::function<Expected<size_t>(uint8_t*, size_t)>& read, uint64_t claimed,
                    std::vector<uint8_t>* out, const std::string& where);

}  // namespace troupe::data
