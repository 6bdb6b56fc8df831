// The GPU model: forward and backward of an MLP (trainers/mlp.h layout) on device buffers, enqueued
// on one stream through kernels/cuda, mirroring MlpCpu step for step. Nothing here synchronises or
// allocates after reserve(), so a whole training step can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/runtime.h"
#include "trainers/cuda/cuda_model.h"
#include "trainers/mlp.h"

namespace troupe {

class MlpCuda final : public CudaModel {
 public:
  // `blas` must outlive the model; work goes to blas.stream().
  MlpCuda(MlpLayout layout, const kernels::cuda::CublasHandle& blas) : layout_(std::move(layout)), blas_(blas) {}
  const MlpLayout& layout() const { return layout_; }

  // CudaModel (cuda_model.h); reserve() allocates the activation buffers.
  Status reserve(int rows) override;
  Status forward_backward(const float* params, const float* x, const int32_t* labels, int batch, float* grads,
                          float* loss_acc, unsigned long long* correct_acc) override;
  Status evaluate(const float* params, const float* x, const int32_t* labels, int batch, float* loss_acc,
                  unsigned long long* correct_acc) override;

 private:
  Status forward(const float* params, const float* x, int batch);
  MlpLayout layout_;
  const kernels::cuda::CublasHandle& blas_;
  int capacity_ = 0;
  std::vector<kernels::cuda::DeviceBuffer<float>> acts_;   // acts_[l]: output of layer l, [rows x out_l]
  std::vector<kernels::cuda::DeviceBuffer<float>> dacts_;  // dacts_[l]: dLoss/d(output of layer l)
};

}  // namespace troupe
