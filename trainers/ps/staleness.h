// Staleness of applied updates: how many other updates a shard applied between a worker's pull and
// the push of the gradient it computed from that pull (shard version at apply minus the version
// the gradient was computed from). 0 means the gradient was computed on the parameters it updates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::ps {

struct StalenessStats {
  int64_t count = 0;     // updates recorded
  double mean = 0;
  int64_t max = 0;
  int64_t p50 = 0, p99 = 0;  // percentiles (a value >= kBuckets - 1 reads as kBuckets - 1)
  // buckets[s]: updates applied s versions late; the last bucket counts that many or more.
  std::vector<int64_t> buckets;
  std::string describe() const;  // "n=1872 mean=2.9 p50=3 p99=7 max=9"
};

class StalenessHistogram {
 public:
  static constexpr size_t kBuckets = 256;
  StalenessHistogram() : buckets_(kBuckets, 0) {}

  void add(int64_t staleness);
  // Adds another histogram's counts (e.g. every shard's into the job's).
  void merge(const StalenessHistogram& other);
  // Rebuilds from bucket counts (what travels on the wire); extra buckets fold into the last.
  static StalenessHistogram from_buckets(const std::vector<int64_t>& buckets, int64_t max, double sum);

  StalenessStats stats() const;
  const std::vector<int64_t>& buckets() const { return buckets_; }
  int64_t max() const { return max_; }
  double sum() const { return sum_; }

 private:
  std::vector<int64_t> buckets_;
  int64_t count_ = 0, max_ = 0;
  double sum_ = 0;
};

}  // namespace troupe::ps
