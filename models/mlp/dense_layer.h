// One dense layer, out = act(in W + b) with W [in x out] row-major and act = ReLU or identity, as
// the built-in trainers' LayerModel implementations run it (the MLP's layers, the CNN's head).
#pragma once

#include <cstdint>
#include <vector>

namespace troupe {

struct DenseLayer {
  int in = 0, out = 0;
  bool relu = true;

  // y [rows x out] = act(x [rows x in] W + b).
  void forward(const float* x, int64_t rows, const float* w, const float* b, float* y) const;

  // The backward of forward for the same rows: `y` is what forward wrote, `dy` the loss gradient
  // with respect to y (overwritten: the ReLU's backward is applied in place). ADDS the weight and
  // bias gradients into dw and db, and writes the input gradient into dx unless dx is null.
  // `scratch` holds the bias gradient before it is added (grown as needed).
  void backward(const float* x, const float* y, float* dy, int64_t rows, const float* w, float* dw, float* db,
                float* dx, std::vector<float>& scratch) const;
};

}  // namespace troupe
