// Small pieces every benchmark driver shares: the command line it was run with (printed so a table
// pasted into docs/benchmarks.md says how to reproduce it), timing, and order statistics.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <cblas.h>
#include <nlohmann/json.hpp>

namespace troupe::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// "AMD EPYC (family 26, model 2)" from /proc/cpuinfo, or "unknown cpu".
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  auto value = [](const std::string& l) {
    size_t c = l.find(':');
    return c == std::string::npos ? std::string() : l.substr(std::min(c + 2, l.size()));
  };
  while (std::getline(in, line) && (name.empty() || family.empty() || model.empty())) {
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model\t", 0) == 0) model = value(line);
  }
  if (name.empty()) return "unknown cpu";
  return name + " (family " + family + ", model " + model + ")";
}

inline double best(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// The BLAS build, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64 (core Zen)".
inline std::string blas_description() {
  return std::string(openblas_get_config()) + " (core " + openblas_get_corename() + ")";
}

// Writes `j` to `path` (pretty-printed); returns false and says why on stderr when it cannot.
inline bool write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "error: cannot write %s; check the directory exists and is writable\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace troupe::bench
