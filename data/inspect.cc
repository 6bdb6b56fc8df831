#include "data/inspect.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace troupe::data {

constexpr size_t kClassesListed = 64;  // the text lists class balance up to this many values

FieldStats field_stats(const Field& f) {
  FieldStats s;
  s.name = f.name;
  s.type = elem_name(f.array.type);
  s.shape = describe(f.array.type, f.array.example_shape());
  s.dims = f.array.example_shape();
  s.source = f.source;
  s.class_names = f.classes;
  const size_t n = static_cast<size_t>(f.array.elements());
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, sum_sq = 0;
  const bool scalar_ints = is_integer(f.array.type) && f.array.example_elements() == 1;
  bool labels = scalar_ints;
  for (size_t i = 0; i < n; ++i) {
    const double v = f.array.value(i);
    if (!std::isfinite(v)) {
      ++s.non_finite;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sum_sq += v * v;
    if (labels) {
      ++s.classes[static_cast<int64_t>(v)];
      if (s.classes.size() > 1000) labels = false;
    }
  }
  if (!labels) s.classes.clear();
  const size_t finite = n - static_cast<size_t>(s.non_finite);
  s.min = finite ? lo : 0;
  s.max = finite ? hi : 0;
  s.mean = finite ? sum / static_cast<double>(finite) : 0;
  s.std = finite ? std::sqrt(std::max(0.0, sum_sq / static_cast<double>(finite) - s.mean * s.mean)) : 0;
  return s;
}


std::vector<SplitStats> inspect(const OpenedDataset& d) {
  std::vector<SplitStats> out;
  for (const auto& [name, t] : d.splits) {
    SplitStats s;
    s.name = name;
    s.examples = t.count();
    for (const Field& f : t.fields) s.fields.push_back(field_stats(f));
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::json normalization_stats(const std::vector<SplitStats>& stats, const std::string& split) {
  nlohmann::json j{{"format", 1}, {"split", split}, {"fields", nlohmann::json::object()}};
  for (const auto& s : stats) {
    if (s.name != split) continue;
    for (const auto& f : s.fields) j["fields"][f.name] = {{"type", f.type}, {"mean", f.mean}, {"std", f.std}};
  }
  return j;
}

nlohmann::json to_json(const std::vector<SplitStats>& stats, const OpenedDataset& d) {
  nlohmann::json j;
  j["files"] = d.files;
  if (!d.target.empty()) j["target"] = d.target;
  j["splits"] = nlohmann::json::array();
  for (const auto& s : stats) {
    nlohmann::json js{{"name", s.name}, {"examples", s.examples}, {"fields", nlohmann::json::array()}};
    for (const auto& f : s.fields) {
      nlohmann::json jf{{"name", f.name}, {"dtype", f.type}, {"shape", f.dims}, {"source", f.source},
                        {"min", f.min},   {"max", f.max},    {"mean", f.mean},   {"std", f.std},   {"non_finite", f.non_finite}};
      if (!f.classes.empty()) {
        nlohmann::json c = nlohmann::json::object();
        for (const auto& [v, n] : f.classes) c[std::to_string(v)] = n;
        jf["classes"] = c;
      }
      if (!f.class_names.empty()) jf["class_names"] = f.class_names;
      js["fields"].push_back(jf);
    }
    j["splits"].push_back(js);
  }
  return j;
}

std::string to_text(const std::vector<SplitStats>& stats, const OpenedDataset& d) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%zu file(s) read and checked\n", d.files.size());
  out += line;
  for (const auto& s : stats) {
    std::snprintf(line, sizeof line, "\nsplit %s: %lld examples\n", s.name.c_str(), static_cast<long long>(s.examples));
    out += line;
    std::snprintf(line, sizeof line, "  %-14s %-20s %12s %12s %12s  %s\n", "field", "type", "min", "max", "mean",
                  "file");
    out += line;
    for (const auto& f : s.fields) {
      std::snprintf(line, sizeof line, "  %-14s %-20s %12.6g %12.6g %12.6g  %s\n", f.name.c_str(), f.shape.c_str(),
                    f.min, f.max, f.mean, f.source.c_str());
      out += line;
      if (f.non_finite > 0) {
        std::snprintf(line, sizeof line, "    %lld values are NaN or infinite\n", static_cast<long long>(f.non_finite));
        out += line;
      }
      if (f.classes.size() > kClassesListed) {  // token ids and the like: a count, the list in --json
        std::snprintf(line, sizeof line, "    %zu distinct values (the balance of each in --json)\n", f.classes.size());
        out += line;
      } else if (!f.classes.empty()) {
        out += "    classes:";
        for (const auto& [v, n] : f.classes) {
          const std::string label = v >= 0 && static_cast<size_t>(v) < f.class_names.size()
                                        ? f.class_names[static_cast<size_t>(v)] + "=" + std::to_string(v)
                                        : std::to_string(v);
          std::snprintf(line, sizeof line, " %s:%lld", label.c_str(), static_cast<long long>(n));
          out += line;
        }
        out += "\n";
      }
    }
  }
  return out;
}

}  // namespace troupe::data
