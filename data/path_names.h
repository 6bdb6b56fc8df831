// File-name helpers the dataset readers share: suffixes, the last path component, its folder, and
// the parts of a comma-separated list.
#pragma once

#include <string>
#include <vector>

namespace troupe::data {

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

inline std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The folder of `path` ("." for a bare name).
inline std::string dir_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// "a,b,,c" -> {"a", "b", "c"}: empty parts dropped.
inline std::vector<std::string> comma_parts(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace troupe::data
