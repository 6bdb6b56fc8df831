// One all-reduce benchmark case as every implementation runs it: troupe's ranks (`troupe bench-rank`)
// and the Gloo and MPI peers (bench/peers/). Sharing this header keeps the three honest: the same
// inputs, the same check of every result, the same timing rule and the same result file, which the
// driver (`troupe bench allreduce`, cli/bench_allreduce.cc) reads.
//
// Inputs: rank r's element i is (h(i) + r) mod 4, with h(i) two bits of a multiplicative hash of i.
// Values are small integers, so sums over up to kMaxRanks ranks are exact even in bf16, and the
// pattern differs from element to element, so a block put in the wrong place is counted as wrong.
// Expected: sum and max exactly; avg within a relative tolerance of the dtype (it divides).
//
// Timing: before every timed iteration the ranks meet in a barrier; each rank then times its own
// call and writes its times. The driver takes, per iteration, the slowest rank's time, and reports
// the median over iterations.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::bench {

inline constexpr int kMaxRanks = 64;  // 3 * 64 = 192 < 256: sums stay exact in bf16

// One size: `bytes` of the buffer, `warmup` untimed then `iters` timed calls.
struct AllreduceCase {
  size_t bytes = 0;
  int iters = 0;
  int warmup = 0;
};

// What one rank measured for one case.
struct CaseResult {
  size_t bytes = 0;
  size_t count = 0;
  std::vector<double> times_us;  // one per timed iteration
  uint64_t wrong = 0;            // wrong elements, summed over iterations
};

inline uint32_t input_hash(size_t i) { return static_cast<uint32_t>(i * 2654435761u) >> 30; }
inline float input_value(int rank, size_t i) { return static_cast<float>((input_hash(i) + rank) & 3u); }

// The expected output, indexed by input_hash(i): four values per (ranks, op).
struct ExpectedOutput {
  float value[4];
  double rel_tolerance = 0;  // 0: exact

  // op: "sum", "avg" or "max"; tolerance: what `avg` may differ by (the dtype's rounding).
  ExpectedOutput(int ranks, const std::string& op, double avg_tolerance) {
    for (uint32_t h = 0; h < 4; ++h) {
      double sum = 0, max = 0;
      for (int r = 0; r < ranks; ++r) {
        const double v = (h + r) & 3u;
        sum += v;
        max = std::max(max, v);
      }
      value[h] = static_cast<float>(op == "max" ? max : op == "avg" ? sum / ranks : sum);
    }
    rel_tolerance = op == "avg" ? avg_tolerance : 0;
  }
  bool matches(size_t i, float got) const {
    const float want = value[input_hash(i)];
    if (rel_tolerance == 0) return got == want;
    return std::fabs(got - want) <= rel_tolerance * std::fabs(want);  // false for NaN
  }
  // Elements of `count` that differ from the expected output; get(i) reads element i as float.
  template <class Get>
  uint64_t count_wrong(size_t count, Get get) const {
    uint64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += !matches(i, get(i));
    return wrong;
  }
};

// The timing rule every implementation follows, for the float peers (Gloo, MPI): warmup, then
// timed iterations; each restores `buf` from `input` (untimed), passes `barrier()`, times
// `allreduce()` (in place on `buf`) and checks the result into r->wrong.
template <class Barrier, class Allreduce>
void time_iterations(const AllreduceCase& c, const std::vector<float>& input, std::vector<float>& buf,
                     const ExpectedOutput& expected, Barrier&& barrier, Allreduce&& allreduce, CaseResult* r) {
  for (int it = 0; it < c.warmup + c.iters; ++it) {
    std::copy(input.begin(), input.end(), buf.begin());
    barrier();
    const auto t0 = std::chrono::steady_clock::now();
    allreduce();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    r->wrong += expected.count_wrong(r->count, [&](size_t i) { return buf[i]; });
    if (it >= c.warmup) r->times_us.push_back(us);
  }
}

// "4096,65536" -> {4096, 65536}; false on anything but a list of non-negative integers.
inline bool parse_list(const std::string& text, std::vector<long long>* out) {
  out->clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0) return false;
    out->push_back(v);
  }
  return !out->empty();
}

// The cases from the three lists a rank program is given (--bytes, --iters, --warmup), one entry
// per case each; false when the lists are malformed or of different lengths.
inline bool parse_cases(const std::string& bytes, const std::string& iters, const std::string& warmup,
                        std::vector<AllreduceCase>* out) {
  std::vector<long long> b, i, w;
  if (!parse_list(bytes, &b) || !parse_list(iters, &i) || !parse_list(warmup, &w)) return false;
  if (b.size() != i.size() || b.size() != w.size()) return false;
  out->clear();
  for (size_t k = 0; k < b.size(); ++k) {
    out->push_back({static_cast<size_t>(b[k]), static_cast<int>(i[k]), static_cast<int>(w[k])});
  }
  return true;
}

inline std::string result_file(const std::string& dir, int rank) {
  return dir + "/result-" + std::to_string(rank) + ".json";
}

// Writes this rank's results to result_file(dir, rank), whole or not at all (a temporary file
// renamed into place), so the driver never reads half a file. False (and a line on stderr) on error.
inline bool write_results(const std::string& dir, int rank, const std::string& implementation,
                          const std::vector<CaseResult>& results) {
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseResult& c : results) {
    cases.push_back({{"bytes", c.bytes}, {"count", c.count}, {"times_us", c.times_us}, {"wrong", c.wrong}});
  }
  const nlohmann::json doc = {{"rank", rank}, {"implementation", implementation}, {"cases", cases}};
  const std::string path = result_file(dir, rank);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << doc.dump() << "\n";
    if (!out) {
      std::fprintf(stderr, "error: cannot write %s\n", tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "error: cannot rename %s to %s\n", tmp.c_str(), path.c_str());
    return false;
  }
  return true;
}

}  // namespace troupe::bench
