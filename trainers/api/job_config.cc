#include <cerrno>
#include <cstdlib>

#include "trainers/api/trainer.h"

namespace troupe {
namespace {

Status bad_value(const std::string& key, const std::string& value, const char* expected) {
  return invalid_argument("trainer setting '" + key + "' = '" + value + "' is not " + expected);
}

bool parse_int(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

Expected<JobConfig> JobConfig::parse(const std::vector<std::string>& items) {
  JobConfig config;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("trainer setting '" + item + "' is not of the form key=value (e.g. hidden=256,128)");
    }
    config.set(item.substr(0, eq), item.substr(eq + 1));
  }
  return config;
}

std::string JobConfig::get(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

Expected<int64_t> JobConfig::get_int(const std::string& key, int64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  int64_t v = 0;
  if (!parse_int(it->second, &v)) return bad_value(key, it->second, "an integer");
  return v;
}

Expected<double> JobConfig::get_double(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || errno != 0 || *end != '\0') return bad_value(key, it->second, "a number");
  return v;
}

Expected<std::vector<int64_t>> JobConfig::get_int_list(const std::string& key,
                                                       const std::vector<int64_t>& fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::vector<int64_t> out;
  const std::string& text = it->second;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t comma = text.find(',', begin);
    if (comma == std::string::npos) comma = text.size();
    int64_t v = 0;
    if (!parse_int(text.substr(begin, comma - begin), &v)) {
      return bad_value(key, text, "a comma-separated list of integers (e.g. 256,128)");
    }
    out.push_back(v);
    begin = comma + 1;
    if (comma + 1 == text.size()) return bad_value(key, text, "a comma-separated list of integers (e.g. 256,128)");
  }
  return out;
}

}  // namespace troupe
