#include "tune/search_space.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace troupe::tune {
namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// "a, 'b,c', d" -> {a, b,c, d}; quotes ' or " keep commas; unbalanced quotes are an error.
Expected<std::vector<std::string>> split_values(const std::string& args) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  bool quoted = false;
  auto flush = [&]() -> Status {
    std::string v = quoted ? cur : trim(cur);
    if (v.empty()) return invalid_argument("an empty value");
    out.push_back(v);
    cur.clear();
    quoted = false;
    return {};
  };
  std::string pending_space;
  for (char c : args) {
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      if (!trim(cur).empty()) return invalid_argument("a quote inside a value");
      cur.clear();
      quote = c;
      quoted = true;
    } else if (c == ',') {
      TROUPE_RETURN_IF_ERROR(flush());
    } else if (!quoted) {
      cur += c;
    } else if (c != ' ' && c != '\t') {
      return invalid_argument("text after a quoted value");
    }
  }
  if (quote) return invalid_argument("an unclosed quote");
  if (!trim(cur).empty() || quoted) TROUPE_RETURN_IF_ERROR(flush());
  return out;
}

bool parse_number(const std::string& s, double* out) {
  const std::string t = trim(s);
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end != t.c_str() + t.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::string format_number(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// A double in [0, 1) from 53 random bits (the same on every platform, unlike std's distributions).
struct Rng {
  uint64_t state;
  uint64_t next() {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  uint64_t below(uint64_t n) { return static_cast<uint64_t>(unit() * static_cast<double>(n)) % n; }
};

std::string draw(const SearchParam& p, Rng& rng) {
  switch (p.kind) {
    case SearchParam::Kind::choice: return p.values[rng.below(p.values.size())];
    case SearchParam::Kind::uniform: return format_number(p.low + (p.high - p.low) * rng.unit());
    case SearchParam::Kind::loguniform:
      return format_number(std::exp(std::log(p.low) + (std::log(p.high) - std::log(p.low)) * rng.unit()));
    case SearchParam::Kind::randint: {
      const auto lo = static_cast<long long>(p.low), hi = static_cast<long long>(p.high);
      return std::to_string(lo + static_cast<long long>(rng.below(static_cast<uint64_t>(hi - lo + 1))));
    }
    case SearchParam::Kind::grid: break;
  }
  return {};
}

}  // namespace

Expected<SearchParam> parse_search_param(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("--search '" + text + "': " + why +
                            " (expected NAME=choice(a,b,...), grid(a,b,...), uniform(low,high), "
                            "loguniform(low,high) or randint(low,high))");
  };
  SearchParam p;
  p.text = text;
  const size_t eq = text.find('=');
  if (eq == std::string::npos) return bad("no '='");
  p.name = trim(text.substr(0, eq));
  while (!p.name.empty() && p.name[0] == '-') p.name.erase(0, 1);  // "--lr=..." means lr
  if (p.name.empty()) return bad("no flag name before '='");
  const std::string rhs = trim(text.substr(eq + 1));
  const size_t open = rhs.find('(');
  if (open == std::string::npos || rhs.back() != ')') return bad("the value is not KIND(...)");
  const std::string kind = trim(rhs.substr(0, open));
  const std::string args = rhs.substr(open + 1, rhs.size() - open - 2);
  if (kind == "choice" || kind == "grid") {
    p.kind = kind == "choice" ? SearchParam::Kind::choice : SearchParam::Kind::grid;
    if (trim(args).empty()) return bad("an empty " + kind + ": give at least one value");
    auto values = split_values(args);
    if (!values.ok()) return bad(values.status().message());
    std::set<std::string> seen;
    for (const std::string& v : *values)
      if (!seen.insert(v).second) return bad("the value '" + v + "' is listed twice");
    p.values = *values;
    return p;
  }
  if (kind == "uniform") p.kind = SearchParam::Kind::uniform;
  else if (kind == "loguniform") p.kind = SearchParam::Kind::loguniform;
  else if (kind == "randint") p.kind = SearchParam::Kind::randint;
  else return bad("unknown kind '" + kind + "'");
  auto values = split_values(args);
  if (!values.ok()) return bad(values.status().message());
  if (values->size() != 2) return bad(kind + " takes two bounds, low and high; got " + std::to_string(values->size()));
  if (!parse_number((*values)[0], &p.low)) return bad("the low bound '" + (*values)[0] + "' is not a number");
  if (!parse_number((*values)[1], &p.high)) return bad("the high bound '" + (*values)[1] + "' is not a number");
  if (p.low >= p.high) return bad("low (" + format_number(p.low) + ") must be below high (" + format_number(p.high) + ")");
  if (p.kind == SearchParam::Kind::loguniform && p.low <= 0) return bad("loguniform needs low > 0");
  if (p.kind == SearchParam::Kind::randint &&
      (p.low != std::floor(p.low) || p.high != std::floor(p.high) || std::fabs(p.low) > 1e15 || std::fabs(p.high) > 1e15))
    return bad("randint takes whole numbers");
  return p;
}

Expected<std::vector<TrialSettings>> expand_trials(const std::vector<SearchParam>& params, int samples, uint64_t seed,
                                                   int max_trials) {
  if (samples < 1) return invalid_argument("--trials must be at least 1, not " + std::to_string(samples));
  std::set<std::string> names;
  long long points = 1;
  for (const SearchParam& p : params) {
    if (!names.insert(p.name).second) return invalid_argument("--search: '" + p.name + "' is searched twice");
    if (p.kind == SearchParam::Kind::grid) {
      points *= static_cast<long long>(p.values.size());
      if (points > max_trials) break;
    }
  }
  if (points * samples > max_trials) {
    return invalid_argument("the search has " + std::to_string(points) + " grid points x " + std::to_string(samples) +
                            " trials each: more than " + std::to_string(max_trials) + " trials");
  }
  Rng rng{seed};
  std::vector<TrialSettings> trials;
  for (int s = 0; s < samples; ++s) {
    for (long long point = 0; point < points; ++point) {
      TrialSettings t;
      long long rest = point;
      for (const SearchParam& p : params) {
        if (p.kind == SearchParam::Kind::grid) {
          t.emplace_back(p.name, p.values[static_cast<size_t>(rest % static_cast<long long>(p.values.size()))]);
          rest /= static_cast<long long>(p.values.size());
        } else {
          t.emplace_back(p.name, draw(p, rng));
        }
      }
      trials.push_back(std::move(t));
    }
  }
  return trials;
}

}  // namespace troupe::tune
