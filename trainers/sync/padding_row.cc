#include "trainers/sync/padding_row.h"

namespace troupe {

void PaddingRow::keep(const Batch& b) {
  features_ = b.features;
  width_ = b.target_width;
  inputs_.assign(b.inputs, b.inputs + b.features);
  if (b.labels) labels_.assign(b.labels, b.labels + b.target_width); else labels_.clear();
  if (b.targets) targets_.assign(b.targets, b.targets + b.target_width); else targets_.clear();
}

Batch PaddingRow::batch() {
  Batch b{inputs_.data(), labels_.empty() ? nullptr : labels_.data(), 1, features_};
  b.targets = targets_.empty() ? nullptr : targets_.data();
  b.target_width = width_;
  fields_.bind(spec_, &b);
  return b;
}

}  // namespace troupe
