// --last-batch pad: a copy of one training row, which a replica without rows at an epoch's short
// last step trains with zero weight (StepRows::weight_at), so it still takes that step's
// collectives and adds nothing. The loop keeps a row of the step before (StepRows::keeps_padding).
#pragma once

#include <cstdint>
#include <vector>

#include "trainers/api/trainer.h"
#include "data/dataset.h"  // BatchFields

namespace troupe {

class PaddingRow {
 public:
  explicit PaddingRow(DataSpec spec) : spec_(std::move(spec)) {}
  // Copies the first row of `b` (its inputs and its targets, labels or values).
  void keep(const Batch& b);
  bool empty() const { return inputs_.empty(); }
  // A batch of the kept row; valid until the next keep().
  Batch batch();

 private:
  DataSpec spec_;
  int64_t features_ = 0, width_ = 1;
  std::vector<float> inputs_, targets_;
  std::vector<int32_t> labels_;
  BatchFields fields_;
};

}  // namespace troupe
