#include "core/dtype.h"

namespace troupe {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "unknown";
}

bool parse_dtype(const std::string& text, DType* out) {
  if (text == "f32") *out = DType::f32;
  else if (text == "f16") *out = DType::f16;
  else if (text == "bf16") *out = DType::bf16;
  else return false;
  return true;
}

}  // namespace troupe
