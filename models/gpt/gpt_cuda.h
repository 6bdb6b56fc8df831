// The gpt on a GPU: GptModel's forward and backward (gpt_model.h, the CPU reference it is tested
// against: tests/gpu/gpt_cuda_test.cc) on device buffers through kernels/cuda (transformer.h, and
// cuBLAS for every product), enqueued on the cuBLAS handle's stream. Nothing synchronises or
// allocates after reserve(), so a step can be captured in a CUDA graph. f32 for now.
//
// As a CudaModel (trainers/cuda/cuda_model.h) a "row" is a window of seq ids: x [rows x seq] holds
// the ids as f32 (as the data feeds them), labels [rows x seq] the next ids. The ids must be below
// the vocabulary (the data layer checks every token when it cuts the windows: an id outside it here
// would read outside the embedding). The loss is the mean over every position; no correct count.
//
// Written while no GPU was lent (2026-11-28): compiled here, first run on the next GPU machine.
// Not yet wired into the GPU trainers (their label buffers hold one label per example).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/blas.h"
#include "kernels/cuda/runtime.h"
#include "models/gpt/gpt_model.h"
#include "trainers/cuda/cuda_model.h"

namespace troupe::models {

class GptCuda final : public CudaModel {
 public:
  // The model `c` with the blocks `p` (GptModel::declare's, so the flat layout is the CPU's) over
  // windows of `seq` ids (<= c.context); `blas` must outlive the model.
  GptCuda(GptConfig c, GptModel::Params p, int64_t seq, const kernels::cuda::CublasHandle& blas);

  Status reserve(int rows) override;
  // grads are overwritten; *loss_acc += the mean loss (correct_acc is left alone: a language model
  // counts no classified examples).
  Status forward_backward(const float* params, const float* x, const int32_t* labels, int batch, float* grads,
                          float* loss_acc, unsigned long long* correct_acc) override;
  Status evaluate(const float* params, const float* x, const int32_t* labels, int batch, float* loss_acc,
                  unsigned long long* correct_acc) override;

 private:
  struct Acts {  // one block's activations, as GptModel::BlockActs
    kernels::cuda::DeviceBuffer<float> ln1, ln1_mean, ln1_rstd, qkv, probs, att, mid, ln2, ln2_mean, ln2_rstd, fc, act;
  };
  // Forward of `batch` windows: the logits, then the loss per position (and, with `grad`, the
  // logits' gradient in their place).
  Status forward(const float* params, const float* x, const int32_t* labels, int batch, bool grad);
  Status block_forward(int64_t l, const float* params, const float* x, int64_t batch, float* out);
  Status block_backward(int64_t l, const float* params, const float* x, int64_t batch, float* grads, float* dx);
  // dW += x^T dy, db += column sums of dy, dx = dy W^T (when dx is not null).
  Status dense_backward(const float* x, const float* w, float* dw, float* db, const float* dy, int64_t rows,
                        int64_t in, int64_t out, float* dx);
  const float* at(const float* base, const Param& p) const { return base + p.offset; }
  float* at(float* base, const Param& p) const { return base + p.offset; }
  cudaStream_t stream() const { return blas_.stream(); }

  GptConfig c_;
  GptModel::Params p_;
  int64_t seq_;
  const kernels::cuda::CublasHandle& blas_;
  size_t params_ = 0;  // floats of the flat layout (its blocks' end)
  int capacity_ = 0;
  kernels::cuda::DeviceBuffer<int32_t> ids_;
  std::vector<kernels::cuda::DeviceBuffer<float>> xs_;  // xs_[l]: block l's input
  std::vector<Acts> acts_;
  kernels::cuda::DeviceBuffer<float> final_, lnf_, lnf_mean_, lnf_rstd_, logits_, row_loss_;
  kernels::cuda::DeviceBuffer<float> dx_, dln_, dwide_, dqkv_, datt_, scratch_;
};

}  // namespace troupe::models
