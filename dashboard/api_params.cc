#include "dashboard/api_params.h"

#include <algorithm>
#include <cctype>

namespace troupe::dashboard {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// Quoted for messages, cut short so a huge value does not make a huge answer.
std::string quoted(const std::string& value) {
  return "'" + (value.size() > 64 ? value.substr(0, 64) + "..." : value) + "'";
}

}  // namespace

std::optional<ParamError> QueryParams::check_known(const std::vector<std::string>& known) const {
  for (const auto& [name, value] : params_) {
    if (name == "token" || std::find(known.begin(), known.end(), name) != known.end()) continue;
    return ParamError{name, "unknown parameter " + quoted(name) + "; this endpoint takes " +
                                (known.empty() ? std::string("none") : join(known))};
  }
  return std::nullopt;
}

std::optional<ParamError> QueryParams::text(const std::string& name, size_t max_len, std::string* out) const {
  out->clear();
  const size_t n = params_.count(name);
  if (n == 0) return std::nullopt;
  if (n > 1) return ParamError{name, "parameter '" + name + "' given " + std::to_string(n) + " times; give it once"};
  const std::string& value = params_.find(name)->second;
  if (value.size() > max_len) {
    return ParamError{name, "parameter '" + name + "' is " + std::to_string(value.size()) +
                                " characters long; at most " + std::to_string(max_len)};
  }
  *out = value;
  return std::nullopt;
}

std::optional<ParamError> QueryParams::integer(const std::string& name, int64_t min, int64_t max, int64_t fallback,
                                               int64_t* out) const {
  std::string value;
  if (auto err = text(name, 32, &value)) return err;
  *out = fallback;
  if (params_.count(name) == 0) return std::nullopt;
  const std::string range = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  const bool digits = !value.empty() && value.size() <= 18 &&
                      std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
  const bool negative = value.size() > 1 && value[0] == '-' && value.size() <= 19 &&
                        std::all_of(value.begin() + 1, value.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits && !negative) return ParamError{name, "parameter '" + name + "' is " + quoted(value) + ", not " + range};
  const int64_t v = std::stoll(value);
  if (v < min || v > max) return ParamError{name, "parameter '" + name + "' is " + value + "; it must be " + range};
  *out = v;
  return std::nullopt;
}

std::optional<ParamError> QueryParams::hex_prefix(const std::string& name, std::string* out) const {
  std::string value;
  if (auto err = text(name, 32, &value)) {
    return ParamError{name, "parameter '" + name + "' must be an id or its prefix: 1 to 32 hex digits"};
  }
  if (params_.count(name) == 0) return std::nullopt;
  const bool hex = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!hex) {
    return ParamError{name, "parameter '" + name + "' is " + quoted(value) +
                                "; it must be an id or its prefix: 1 to 32 hex digits"};
  }
  *out = lower(value);
  return std::nullopt;
}

std::optional<ParamError> QueryParams::one_of(const std::string& name, const std::vector<std::string>& allowed,
                                              std::string* out) const {
  std::string value;
  if (auto err = text(name, 64, &value)) return err;
  if (params_.count(name) == 0) return std::nullopt;
  for (const std::string& a : allowed) {
    if (lower(a) == lower(value)) {
      *out = a;
      return std::nullopt;
    }
  }
  return ParamError{name, "parameter '" + name + "' is " + quoted(value) + "; it must be one of " + join(allowed)};
}

}  // namespace troupe::dashboard
