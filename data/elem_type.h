// The element types a dataset's fields hold (data/array.h): the integer and floating types NumPy,
// IDX, CSV and token files store. Separate from core/dtype.h (the compute precisions f32/f16/bf16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe::data {

enum class ElemType : uint8_t { u8, i8, u16, i16, u32, i32, i64, f16, f32, f64 };

size_t elem_size(ElemType t);
const char* elem_name(ElemType t);  // "u8", "i8", ..., "f64"
// Parses a name elem_name gives; false for anything else.
bool parse_elem_type(const std::string& name, ElemType* out);
bool is_integer(ElemType t);
// The value at p (native byte order) as a double.
double elem_value(ElemType t, const uint8_t* p);

}  // namespace troupe::data
