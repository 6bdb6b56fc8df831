#include "trainers/batch_feed.h"

#include <algorithm>

#include "trainers/local_trainer.h"

namespace troupe {

SliceFeed::SliceFeed(const Dataset& data, uint64_t seed, int64_t global_batch, int rank, int replicas)
    : data_(data),
      seed_(seed),
      global_batch_(global_batch),
      local_batch_(replicas > 0 ? global_batch / replicas : 0),
      steps_(global_batch > 0 ? data.count / global_batch : 0),
      rank_(rank),
      x_(static_cast<size_t>(local_batch_) * data.features()),
      y_(static_cast<size_t>(local_batch_)) {}

Status SliceFeed::begin_epoch(int epoch) {
  order_ = epoch_permutation(data_.count, seed_, epoch);
  step_ = 0;
  return {};
}

Expected<bool> SliceFeed::next(Batch* out) {
  if (step_ >= steps_ || order_.empty()) return false;
  const int64_t features = data_.features();
  for (int64_t r = 0; r < local_batch_; ++r) {
    const int32_t idx = order_[static_cast<size_t>(step_ * global_batch_ + rank_ * local_batch_ + r)];
    std::copy_n(data_.images.data() + idx * features, features, x_.data() + r * features);
    y_[static_cast<size_t>(r)] = data_.labels[static_cast<size_t>(idx)];
  }
  ++step_;
  *out = Batch{x_.data(), y_.data(), local_batch_, features};
  return true;
}

std::string describe(const DataTag& tag) {
  if (tag.empty()) return "no data position";
  std::string s = "epoch " + std::to_string(tag.front().epoch);
  for (size_t i = 0; i < tag.size(); ++i) {
    const DataSpan& d = tag[i];
    if (i > 0) s += d.epoch == tag[i - 1].epoch ? " + " : " + epoch " + std::to_string(d.epoch) + " ";
    else s += " ";
    s += "shard " + std::to_string(d.shard) + " [" + std::to_string(d.offset) + ", " + std::to_string(d.offset + d.rows) + ")";
  }
  return s;
}

}  // namespace troupe
