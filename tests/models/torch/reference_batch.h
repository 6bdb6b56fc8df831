// The batch a fixture's JSON reference holds ("x", "y": what make_torch_fixtures.py computed PyTorch's
// step on), as a troupe Batch of 1x8x8 examples over its own copies of the values.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainers/api/trainer.h"

namespace troupe::testing {

struct ReferenceBatch {
  explicit ReferenceBatch(const nlohmann::json& ref)
      : x(ref.at("x").get<std::vector<float>>()), y(ref.at("y").get<std::vector<int32_t>>()) {
    batch.inputs = x.data();
    batch.labels = y.data();
    batch.size = static_cast<int64_t>(y.size());
    batch.features = 64;
  }
  ReferenceBatch(const ReferenceBatch&) = delete;
  ReferenceBatch& operator=(const ReferenceBatch&) = delete;

  std::vector<float> x;
  std::vector<int32_t> y;
  Batch batch;
};

}  // namespace troupe::testing
