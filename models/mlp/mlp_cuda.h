// The GPU model: forward and backward of an MLP (models/mlp/mlp.h layout) on device buffers, enqueued
// on one stream through kernels/cuda, mirroring MlpCpu step for step. Nothing here synchronises or
// allocates after reserve(), so a whole training step can be captured in a CUDA graph.
//
// Mixed precision (`precision` bf16 or f16), as MlpCpu::set_precision defines it: the parameters
// (f32 masters) and the input are rounded to the type for the layers, every matrix product reads
// 16-bit operands with f32 products and sums (tensor cores: kernels/cuda/blas.h matmul_low), every
// layer output, the loss gradient and each layer's input gradient are rounded, and so is every
// gradient written. With f16, set_loss_scale() gives the device float that the loss gradient is
// multiplied by before it is rounded (MlpCpu's `loss_scale`; cuda_job.h keeps it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/runtime.h"
#include "trainers/cuda/cuda_model.h"
#include "models/mlp/mlp.h"

namespace troupe {

class MlpCuda final : public CudaModel {
 public:
  // `blas` must outlive the model; work goes to blas.stream().
  MlpCuda(MlpLayout layout, const kernels::cuda::CublasHandle& blas, DType precision = DType::f32)
      : layout_(std::move(layout)), blas_(blas), precision_(precision) {}
  const MlpLayout& layout() const { return layout_; }

  // CudaModel (cuda_model.h); reserve() allocates the activation buffers.
  Status reserve(int rows) override;
  Status forward_backward(const float* params, const float* x, const int32_t* labels, int batch, float* grads,
                          float* loss_acc, unsigned long long* correct_acc) override;
  Status evaluate(const float* params, const float* x, const int32_t* labels, int batch, float* loss_acc,
                  unsigned long long* correct_acc) override;
  Status set_loss_scale(const float* scale) override;

 private:
  Status forward(const float* params, const float* x, int batch);
  Status forward_low(const float* params, const float* x, int batch);
  Status backward_low(int batch, float* grads, float* loss_acc, unsigned long long* correct_acc,
                      const int32_t* labels);
  bool low() const { return precision_ != DType::f32; }
  MlpLayout layout_;
  const kernels::cuda::CublasHandle& blas_;
  const DType precision_;
  const float* loss_scale_ = nullptr;  // device float, or null: scale 1
  int capacity_ = 0;
  std::vector<kernels::cuda::DeviceBuffer<float>> acts_;   // acts_[l]: output of layer l, [rows x out_l]
  std::vector<kernels::cuda::DeviceBuffer<float>> dacts_;  // dacts_[l]: dLoss/d(output of layer l)
  // bf16 / f16 only: the rounded parameters (f32 and bits), the input's bits, and the bits of every
  // layer output and output gradient, which the 16-bit matrix products read.
  kernels::cuda::DeviceBuffer<float> params_r_;
  kernels::cuda::DeviceBuffer<uint16_t> params_low_, x_low_;
  std::vector<kernels::cuda::DeviceBuffer<uint16_t>> acts_low_, dacts_low_;
};

}  // namespace troupe
