#include "data/elem_type.h"

#include <cstring>

#include "core/dtype.h"

namespace troupe::data {

namespace {
struct Info {
  ElemType type;
  const char* name;
  size_t size;
};
constexpr Info kInfo[] = {{ElemType::u8, "u8", 1},   {ElemType::i8, "i8", 1},   {ElemType::u16, "u16", 2},
                          {ElemType::i16, "i16", 2}, {ElemType::u32, "u32", 4}, {ElemType::i32, "i32", 4},
                          {ElemType::i64, "i64", 8}, {ElemType::f16, "f16", 2}, {ElemType::f32, "f32", 4},
                          {ElemType::f64, "f64", 8}};

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

size_t elem_size(ElemType t) { return kInfo[static_cast<int>(t)].size; }
const char* elem_name(ElemType t) { return kInfo[static_cast<int>(t)].name; }

bool parse_elem_type(const std::string& name, ElemType* out) {
  for (const Info& i : kInfo) {
    if (name == i.name) {
      *out = i.type;
      return true;
    }
  }
  return false;
}

bool is_integer(ElemType t) { return t != ElemType::f16 && t != ElemType::f32 && t != ElemType::f64; }

double elem_value(ElemType t, const uint8_t* p) {
  switch (t) {
    case ElemType::u8: return *p;
    case ElemType::i8: return static_cast<int8_t>(*p);
    case ElemType::u16: return load<uint16_t>(p);
    case ElemType::i16: return load<int16_t>(p);
    case ElemType::u32: return load<uint32_t>(p);
    case ElemType::i32: return load<int32_t>(p);
    case ElemType::i64: return static_cast<double>(load<int64_t>(p));
    case ElemType::f16: return f16_to_f32(load<uint16_t>(p));
    case ElemType::f32: return load<float>(p);
    case ElemType::f64: return load<double>(p);
  }
  return 0;
}

}  // namespace troupe::data
