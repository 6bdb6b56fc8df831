#include "data/feed/batch_feed.h"

#include <algorithm>

#include "core/splitmix.h"
#include "data/feed/epoch_order.h"

namespace troupe {

SliceFeed::SliceFeed(const Dataset& data, uint64_t seed, int64_t global_batch, int rank, int replicas, bool pad)
    : data_(data),
      seed_(seed),
      global_batch_(global_batch),
      local_batch_(replicas > 0 ? global_batch / replicas : 0),
      steps_(epoch_steps(data.count, global_batch, pad)),
      pad_(pad),
      rank_(rank),
      x_(static_cast<size_t>(local_batch_) * data.features()),
      y_(data.classifies() ? static_cast<size_t>(local_batch_ * data.target_width) : 0),
      t_(data.classifies() ? 0 : static_cast<size_t>(local_batch_ * data.target_width)),
      spec_(data.spec()) {}

Status SliceFeed::begin_epoch(int epoch) {
  order_ = epoch_permutation(data_.count, seed_, epoch);
  step_ = 0;
  epoch_ = epoch;
  return {};
}

Expected<bool> SliceFeed::next(Batch* out) {
  if (step_ >= steps_ || order_.empty()) return false;
  // This replica's rows of the step's global batch (fewer, or none, at a padded last step).
  const int64_t rows = std::clamp<int64_t>(
      step_examples(data_.count, global_batch_, pad_, step_) - rank_ * local_batch_, 0, local_batch_);
  if (rows == 0) {
    ++step_;
    return false;
  }
  const int64_t features = data_.features(), w = data_.target_width;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t idx = order_[static_cast<size_t>(step_ * global_batch_ + rank_ * local_batch_ + r)];
    copy_example(data_, idx, x_.data() + r * features, y_.data() + r * w, t_.data() + r * w);
    if (transform_) transform_(epoch_, idx, x_.data() + r * features);
  }
  ++step_;
  *out = Batch{x_.data(), data_.classifies() ? y_.data() : nullptr, rows, features};
  out->targets = data_.classifies() ? nullptr : t_.data();
  out->target_width = w;
  fields_.bind(spec_, out);
  return true;
}

uint64_t example_seed(uint64_t seed, int epoch, int64_t example) {
  // mixed in turn: nearby examples and epochs get unrelated streams
  return splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(example));
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
