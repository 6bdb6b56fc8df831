// Fused softmax cross-entropy: loss, gradient and correct count in one pass, accumulated on the
// device so a training loop reads them once per interval instead of once per step.
#include <cmath>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/ops.h"

namespace troupe::kernels::cuda {

// ------------------------------------------------------------------------------------------------
// CUDA kernels

namespace {

constexpr int kMaxClasses = 1024;
constexpr int kRowsPerBlock = 8;  // one warp per row

// Each warp owns one row; lane j handles classes j, j + 32, ... Order of work per row:
//   1. max and first arg-max (ties go to the lower class index, as a sequential scan does),
//   2. s = sum exp(x - max); loss = log(s) + max - x[label],
//   3. all reads done (__syncwarp), then dx = (exp(x - max) / s - onehot) / rows, which makes
//      dlogits == logits safe.
// Per-block totals of loss and correct rows go to the accumulators with one atomic each.
__global__ void softmax_xent_kernel(const float* logits, const int32_t* __restrict__ labels, int rows, int classes,
                                    float* dlogits, float* loss_acc, unsigned long long* correct_acc) {
  __shared__ float block_loss[kRowsPerBlock];
  __shared__ unsigned block_correct[kRowsPerBlock];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * kRowsPerBlock + warp;
  float row_loss = 0.0f;
  unsigned row_correct = 0;
  if (row < rows) {
    const float* x = logits + size_t(row) * classes;
    float best = -INFINITY;
    int best_idx = classes;  // "none yet": loses every tie
    for (int c = lane; c < classes; c += 32) {
      float v = x[c];
      if (best_idx == classes || v > best) {  // the first value seen, then only strictly larger ones
        best = v;
        best_idx = c;
      }
    }
    for (int off = 16; off > 0; off /= 2) {
      float ob = __shfl_xor_sync(0xffffffffu, best, off);
      int oi = __shfl_xor_sync(0xffffffffu, best_idx, off);
      bool take = oi != classes && (best_idx == classes || ob > best || (ob == best && oi < best_idx));
      if (take) {
        best = ob;
        best_idx = oi;
      }
    }
    float sum = 0.0f;
    for (int c = lane; c < classes; c += 32) sum += expf(x[c] - best);
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const int label = labels[row];
    const bool valid = label >= 0 && label < classes;
    const float label_logit = valid ? x[label] : NAN;
    row_loss = logf(sum) - (label_logit - best);
    row_correct = valid && best_idx == label ? 1u : 0u;
    __syncwarp();
    if (dlogits) {
      float* dx = dlogits + size_t(row) * classes;
      const float inv_rows = 1.0f / rows, inv_sum = 1.0f / sum;
      for (int c = lane; c < classes; c += 32) {
        float p = expf(x[c] - best) * inv_sum;
        dx[c] = (p - (c == label ? 1.0f : 0.0f)) * inv_rows;
      }
    }
  }
  if (lane == 0) {
    block_loss[warp] = row_loss;
    block_correct[warp] = row_correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total_loss = 0.0f;
    unsigned total_correct = 0;
    for (int w = 0; w < kRowsPerBlock; ++w) {
      total_loss += block_loss[w];
      total_correct += block_correct[w];
    }
    if (loss_acc) atomicAdd(loss_acc, total_loss / rows);
    if (correct_acc && total_correct) atomicAdd(correct_acc, static_cast<unsigned long long>(total_correct));
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// launchers

Status softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                    float* loss_acc, unsigned long long* correct_acc, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_matrix("softmax_xent", rows, classes));
  if (classes < 1 || classes > kMaxClasses) {
    return invalid_argument("cuda::softmax_xent: classes = " + std::to_string(classes) + " is outside [1, " +
                            std::to_string(kMaxClasses) + "]");
  }
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("softmax_xent", size_t(rows), {logits, labels}));
  if (rows == 0) return {};
  unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_xent_kernel<<<blocks, kRowsPerBlock * 32, 0, stream>>>(logits, labels, rows, classes, dlogits, loss_acc,
                                                                 correct_acc);
  TROUPE_LAUNCH_CHECK("softmax_xent_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
