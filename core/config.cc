#include "core/config.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace troupe {
namespace {

const char* type_name(const std::string*) { return "string"; }
const char* type_name(const int64_t*) { return "int"; }
[[maybe_unused]] const char* type_name(const double*) { return "double"; }
const char* type_name(const bool*) { return "bool"; }

bool parse_value(const std::string& text, std::string* out) {
  *out = text;
  return true;
}
bool parse_value(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}
[[maybe_unused]] bool parse_value(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}
bool parse_value(const std::string& text, bool* out) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") *out = true;
  else if (text == "0" || text == "false" || text == "no" || text == "off") *out = false;
  else return false;
  return true;
}

std::string to_text(const std::string& v) { return v; }
std::string to_text(int64_t v) { return std::to_string(v); }
std::string to_text(bool v) { return v ? "true" : "false"; }
[[maybe_unused]] std::string to_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string env_name(const std::string& name) {
  std::string s = "TROUPE_";
  for (char c : name) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::vector<SettingInfo>& Config::settings() {
  static const std::vector<SettingInfo> table = [] {
    std::vector<SettingInfo> t;
    Config defaults;
#define TROUPE_SETTING(type, name, def, doc) \
  t.push_back({#name, type_name(&defaults.name), to_text(defaults.name), doc});
#include "core/config_def.h"
#undef TROUPE_SETTING
    return t;
  }();
  return table;
}

Status Config::set(const std::string& name, const std::string& value) {
#define TROUPE_SETTING(type, field, def, doc)                                                           \
  if (name == #field) {                                                                                 \
    if (!parse_value(value, &field)) {                                                                  \
      return invalid_argument("setting '" + name + "': '" + value + "' is not a valid " +              \
                              type_name(&field) + " (" + doc + ")");                                   \
    }                                                                                                   \
    return {};                                                                                          \
  }
#include "core/config_def.h"
#undef TROUPE_SETTING
  return invalid_argument("unknown setting '" + name + "'; `troupe config` lists them all");
}

Status Config::set_assignment(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    return invalid_argument("'" + assignment + "' is not of the form name=value");
  }
  return set(assignment.substr(0, eq), assignment.substr(eq + 1));
}

Expected<std::string> Config::get(const std::string& name) const {
#define TROUPE_SETTING(type, field, def, doc) \
  if (name == #field) return to_text(field);
#include "core/config_def.h"
#undef TROUPE_SETTING
  return invalid_argument("unknown setting '" + name + "'; `troupe config` lists them all");
}

Expected<Config> Config::from_environment() {
  Config c;
  for (const SettingInfo& s : settings()) {
    std::string var = env_name(s.name);
    if (const char* v = std::getenv(var.c_str())) {
      Status st = c.set(s.name, v);
      if (!st.ok()) return st.with_context("environment variable " + var);
    }
  }
  return c;
}

}  // namespace troupe
