// The schema: value type names, the lookups of a DataSpec, a batch's fields by name.
#include <cstring>

#include "data/schema.h"

namespace troupe {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::i64: return "i64";
    case ValueType::f16: return "f16";
    case ValueType::f32: return "f32";
    case ValueType::f64: return "f64";
  }
  return "?";
}

bool parse_value_type(const std::string& name, ValueType* out) {
  for (int i = 0; i <= static_cast<int>(ValueType::f64); ++i) {
    if (name == value_type_name(static_cast<ValueType>(i))) {
      *out = static_cast<ValueType>(i);
      return true;
    }
  }
  return false;
}

std::string FieldSpec::describe() const {
  std::string s = name + ": " + value_type_name(type) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  s += "]";
  if (stored != type) s += std::string(" (") + value_type_name(stored) + " in the files)";
  return s;
}

const FieldSpec* DataSpec::field(const std::string& name) const {
  for (const FieldSpec& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<int64_t> DataSpec::input_shape() const {
  const FieldSpec* only = nullptr;
  int inputs = 0;
  for (const FieldSpec& f : fields) {
    if (f.target) continue;
    ++inputs;
    only = &f;
  }
  if (inputs == 1 && !only->shape.empty()) return only->shape;
  return {features};
}

const FieldView* Batch::field(const std::string& name) const {
  for (int i = 0; i < num_fields; ++i)
    if (name == fields[i].name) return &fields[i];
  return nullptr;
}

}  // namespace troupe
