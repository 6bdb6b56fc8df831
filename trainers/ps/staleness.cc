#include "trainers/ps/staleness.h"

#include <algorithm>
#include <cstdio>

namespace troupe::ps {

void StalenessHistogram::add(int64_t s) {
  s = std::max<int64_t>(s, 0);
  ++buckets_[static_cast<size_t>(std::min<int64_t>(s, kBuckets - 1))];
  ++count_;
  max_ = std::max(max_, s);
  sum_ += static_cast<double>(s);
}

void StalenessHistogram::merge(const StalenessHistogram& o) {
  for (size_t i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  max_ = std::max(max_, o.max_);
  sum_ += o.sum_;
}

StalenessHistogram StalenessHistogram::from_buckets(const std::vector<int64_t>& buckets, int64_t max, double sum) {
  StalenessHistogram h;
  for (size_t i = 0; i < buckets.size(); ++i) {
    h.buckets_[std::min(i, kBuckets - 1)] += buckets[i];
    h.count_ += buckets[i];
  }
  h.max_ = max;
  h.sum_ = sum;
  return h;
}

StalenessStats StalenessHistogram::stats() const {
  StalenessStats s;
  s.count = count_;
  s.max = max_;
  s.mean = count_ ? sum_ / static_cast<double>(count_) : 0;
  s.buckets = buckets_;
  while (!s.buckets.empty() && s.buckets.back() == 0) s.buckets.pop_back();
  // The smallest staleness with at least q of the updates at or below it.
  auto percentile = [&](double q) -> int64_t {
    int64_t seen = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (static_cast<double>(seen) >= q * static_cast<double>(count_)) return static_cast<int64_t>(i);
    }
    return 0;
  };
  if (count_) {
    s.p50 = percentile(0.5);
    s.p99 = percentile(0.99);
  }
  return s;
}

std::string StalenessStats::describe() const {
  char text[128];
  std::snprintf(text, sizeof text, "n=%lld mean=%.2f p50=%lld p99=%lld max=%lld", static_cast<long long>(count), mean,
                static_cast<long long>(p50), static_cast<long long>(p99), static_cast<long long>(max));
  return text;
}

}  // namespace troupe::ps
