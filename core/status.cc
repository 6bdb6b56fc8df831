#include "core/status.h"

namespace troupe {

const char* code_name(Code code) {
  switch (code) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::not_found: return "not_found";
    case Code::io_error: return "io_error";
    case Code::corrupt_data: return "corrupt_data";
    case Code::numeric_error: return "numeric_error";
    case Code::unavailable: return "unavailable";
    case Code::timeout: return "timeout";
    case Code::version_mismatch: return "version_mismatch";
    case Code::internal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace troupe
