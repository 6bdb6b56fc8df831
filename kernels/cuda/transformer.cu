// The transformer's CUDA kernels (kernels/cuda/transformer.h). Row kernels (LayerNorm, the causal
// softmax and its backward, the vocabulary cross-entropy) give each row one block of kRowThreads
// threads and reduce in the block in a fixed order; column kernels (parameter gradients, the
// embeddings' backward) give each column one thread that walks the rows in order, so every sum is
// deterministic and the embeddings' backward is the CPU's, bit for bit.
#include <cmath>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/transformer.h"

namespace troupe::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr unsigned kMaxRowBlocks = 65535;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks); }

// The block's sum of v (every thread gets it). blockDim.x is a multiple of 32, at most 1024.
__device__ float block_sum(float v) {
  __shared__ float part[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? part[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) w += __shfl_xor_sync(0xffffffffu, w, off);
    if (lane == 0) total = w;
  }
  __syncthreads();
  const float out = total;
  __syncthreads();  // part and total are reused by the next call
  return out;
}

// The block's maximum of v.
__device__ float block_max(float v) {
  __shared__ float part[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? part[lane] : -INFINITY;
    for (int off = 16; off > 0; off >>= 1) w = fmaxf(w, __shfl_xor_sync(0xffffffffu, w, off));
    if (lane == 0) total = w;
  }
  __syncthreads();
  const float out = total;
  __syncthreads();
  return out;
}

__device__ float tanh_like_cpu(float x) { return 1.0f - 2.0f / (expf(2.0f * x) + 1.0f); }

__global__ void layernorm_forward_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                         const float* __restrict__ beta, int64_t rows, int64_t dim, float eps,
                                         float* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * dim;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) s += xr[c];
    const float m = block_sum(s) / static_cast<float>(dim);
    float v = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      const float d = xr[c] - m;
      v += d * d;
    }
    const float var = block_sum(v) / static_cast<float>(dim);
    const float sd = 1.0f / sqrtf(var + eps);
    float* yr = y + r * dim;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) yr[c] = (xr[c] - m) * sd * gamma[c] + beta[c];
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = sd;
    }
  }
}

__global__ void layernorm_backward_dx_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                             const float* __restrict__ gamma, const float* __restrict__ mean,
                                             const float* __restrict__ rstd, int64_t rows, int64_t dim,
                                             float* __restrict__ dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    const float m = mean[r], s = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      const float g = dyr[c] * gamma[c];
      sg += g;
      sgx += g * (xr[c] - m) * s;
    }
    const float mg = block_sum(sg) / static_cast<float>(dim);
    const float mgx = block_sum(sgx) / static_cast<float>(dim);
    float* dxr = dx + r * dim;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      const float xhat = (xr[c] - m) * s;
      dxr[c] += s * (dyr[c] * gamma[c] - mg - xhat * mgx);
    }
  }
}

// One thread per column: dgamma[c] += sum_r dy * xhat, dbeta[c] += sum_r dy, rows in order.
__global__ void layernorm_backward_params_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                                 const float* __restrict__ mean, const float* __restrict__ rstd,
                                                 int64_t rows, int64_t dim, float* __restrict__ dgamma,
                                                 float* __restrict__ dbeta) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < dim; c += int64_t(gridDim.x) * blockDim.x) {
    float g = dgamma[c], b = dbeta[c];
    for (int64_t r = 0; r < rows; ++r) {
      const float d = dy[r * dim + c];
      g += d * ((x[r * dim + c] - mean[r]) * rstd[r]);
      b += d;
    }
    dgamma[c] = g;
    dbeta[c] = b;
  }
}

__global__ void gelu_forward_kernel(const float* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const float t = tanh_like_cpu(kSqrt2OverPi * (v + kCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const float t = tanh_like_cpu(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

// Rows of `count` seq x seq score matrices (row r is position r % seq): softmax over [0, i] with the
// max subtracted, zeros after the diagonal.
__global__ void causal_softmax_kernel(float* p, int64_t count_rows, int64_t seq) {
  for (int64_t r = blockIdx.x; r < count_rows; r += gridDim.x) {
    float* row = p + r * seq;
    const int64_t i = r % seq;
    float top = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) top = fmaxf(top, row[j]);
    top = block_max(top);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
      const float e = expf(row[j] - top);
      row[j] = e;
      sum += e;
    }
    const float inv = 1.0f / block_sum(sum);
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) row[j] = j <= i ? row[j] * inv : 0.0f;
  }
}

// dS = scale * P * (dP - rowsum(P * dP)) on [0, i], zeros after; in place of dP.
__global__ void causal_softmax_backward_kernel(const float* p, float* dp, int64_t count_rows, int64_t seq,
                                               float scale) {
  for (int64_t r = blockIdx.x; r < count_rows; r += gridDim.x) {
    const float* pr = p + r * seq;
    float* d = dp + r * seq;
    const int64_t i = r % seq;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) dot += pr[j] * d[j];
    dot = block_sum(dot);
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) d[j] = j <= i ? scale * pr[j] * (d[j] - dot) : 0.0f;
  }
}

__global__ void vocab_xent_kernel(const float* logits, const int32_t* __restrict__ targets, int64_t rows,
                                  int64_t vocab, float grad_scale, float* dlogits, float* __restrict__ row_loss) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * vocab;
    float top = -INFINITY;
    for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) top = fmaxf(top, x[c]);
    top = block_max(top);
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) sum += expf(x[c] - top);
    sum = block_sum(sum);
    const int32_t t = targets[r];
    const bool valid = t >= 0 && t < vocab;
    const float target_logit = valid ? x[t] : NAN;  // read by every thread before any write below
    __syncthreads();
    if (threadIdx.x == 0) row_loss[r] = logf(sum) - (target_logit - top);
    if (dlogits) {
      float* d = dlogits + r * vocab;
      const float k = grad_scale / static_cast<float>(rows), inv = 1.0f / sum;
      for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x)
        d[c] = (expf(x[c] - top) * inv - (c == t ? 1.0f : 0.0f)) * k;
    }
  }
}

__global__ void sum_in_order_kernel(const float* x, int64_t n, float scale, bool accumulate, float* out) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  *out = (accumulate ? *out : 0.0f) + scale * s;
}

__global__ void bias_grad_add_kernel(const float* __restrict__ dy, int64_t rows, int64_t cols, float* __restrict__ db) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
    float s = db[c];
    for (int64_t r = 0; r < rows; ++r) s += dy[r * cols + c];
    db[c] = s;
  }
}

__global__ void embed_forward_kernel(const int32_t* __restrict__ ids, const float* __restrict__ tok,
                                     const float* __restrict__ pos, int64_t rows, int64_t seq, int64_t dim,
                                     float* __restrict__ x) {
  const int64_t n = rows * dim;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / dim, c = k % dim;
    x[k] = tok[int64_t(ids[i]) * dim + c] + pos[(i % seq) * dim + c];
  }
}

__global__ void embed_backward_kernel(const int32_t* __restrict__ ids, const float* __restrict__ dx, int64_t rows,
                                      int64_t seq, int64_t dim, float* __restrict__ dtok, float* __restrict__ dpos) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < dim; c += int64_t(gridDim.x) * blockDim.x) {
    for (int64_t i = 0; i < rows; ++i) {
      const float d = dx[i * dim + c];
      dtok[int64_t(ids[i]) * dim + c] += d;
      dpos[(i % seq) * dim + c] += d;
    }
  }
}

__global__ void ids_from_floats_kernel(const float* x, int64_t n, int32_t* ids) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    ids[i] = static_cast<int32_t>(x[i]);
}

Status check_sizes(const char* op, std::initializer_list<int64_t> sizes) {
  for (int64_t v : sizes)
    if (v < 0) return invalid_argument(std::string("cuda::") + op + ": a negative size");
  return {};
}

unsigned column_blocks(int64_t cols) { return detail::blocks_for(static_cast<size_t>(cols), 128); }

}  // namespace

Status layernorm_forward(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t dim, float eps,
                         float* y, float* mean, float* rstd, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("layernorm_forward", {rows, dim}));
  TROUPE_RETURN_IF_ERROR(
      detail::check_pointers("layernorm_forward", static_cast<size_t>(rows * dim), {x, gamma, beta, y, mean, rstd}));
  if (rows == 0 || dim == 0) return {};
  layernorm_forward_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(x, gamma, beta, rows, dim, eps, y, mean, rstd);
  TROUPE_LAUNCH_CHECK("layernorm_forward_kernel");
  return {};
}

Status layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                          int64_t rows, int64_t dim, float* dx, float* dgamma, float* dbeta, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("layernorm_backward", {rows, dim}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("layernorm_backward", static_cast<size_t>(rows * dim),
                                                {dy, x, gamma, mean, rstd, dx, dgamma, dbeta}));
  if (rows == 0 || dim == 0) return {};
  layernorm_backward_dx_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(dy, x, gamma, mean, rstd, rows, dim, dx);
  TROUPE_LAUNCH_CHECK("layernorm_backward_dx_kernel");
  layernorm_backward_params_kernel<<<column_blocks(dim), 128, 0, stream>>>(dy, x, mean, rstd, rows, dim, dgamma, dbeta);
  TROUPE_LAUNCH_CHECK("layernorm_backward_params_kernel");
  return {};
}

Status gelu_forward(const float* x, float* y, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("gelu_forward", n, {x, y}));
  if (n == 0) return {};
  gelu_forward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(x, y, n);
  TROUPE_LAUNCH_CHECK("gelu_forward_kernel");
  return {};
}

Status gelu_backward(const float* x, const float* dy, float* dx, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("gelu_backward", n, {x, dy, dx}));
  if (n == 0) return {};
  gelu_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(x, dy, dx, n);
  TROUPE_LAUNCH_CHECK("gelu_backward_kernel");
  return {};
}

static Status check_attention(const char* op, const AttentionShape& s) {
  if (s.batch < 0 || s.seq < 0 || s.heads < 1 || s.dim < 1 || s.dim % s.heads != 0)
    return invalid_argument(std::string("cuda::") + op + ": batch " + std::to_string(s.batch) + ", seq " +
                            std::to_string(s.seq) + ", heads " + std::to_string(s.heads) + ", dim " +
                            std::to_string(s.dim) + " (heads must divide dim)");
  return {};
}

Status attention_forward(const CublasHandle& handle, const float* qkv, const AttentionShape& s, float* probs,
                         float* out) {
  TROUPE_RETURN_IF_ERROR(check_attention("attention_forward", s));
  const int64_t T = s.seq, D = s.dim, H = s.heads, hd = s.head_dim(), ld = 3 * D;
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("attention_forward", static_cast<size_t>(s.batch * T), {qkv, probs, out}));
  if (s.batch == 0 || T == 0) return {};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int t = static_cast<int>(T), h = static_cast<int>(hd), heads = static_cast<int>(H);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* q = qkv + b * T * ld;
    float* p = probs + b * H * T * T;
    // S = scale Q K^T for every head at once (head h's columns start h * hd floats along the row).
    TROUPE_RETURN_IF_ERROR(matmul_strided(handle, false, true, t, t, h, scale, q, ld, hd, q + D, ld, hd, 0.0f, p, T,
                                          T * T, heads));
    causal_softmax_kernel<<<row_blocks(H * T), kRowThreads, 0, handle.stream()>>>(p, H * T, T);
    TROUPE_LAUNCH_CHECK("causal_softmax_kernel");
    // O = P V.
    TROUPE_RETURN_IF_ERROR(matmul_strided(handle, false, false, t, h, t, 1.0f, p, T, T * T, q + 2 * D, ld, hd, 0.0f,
                                          out + b * T * D, D, hd, heads));
  }
  return {};
}

Status attention_backward(const CublasHandle& handle, const float* qkv, const float* probs, const float* dout,
                          const AttentionShape& s, float* dqkv, float* scratch) {
  TROUPE_RETURN_IF_ERROR(check_attention("attention_backward", s));
  const int64_t T = s.seq, D = s.dim, H = s.heads, hd = s.head_dim(), ld = 3 * D;
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("attention_backward", static_cast<size_t>(s.batch * T),
                                                {qkv, probs, dout, dqkv, scratch}));
  if (s.batch == 0 || T == 0) return {};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int t = static_cast<int>(T), h = static_cast<int>(hd), heads = static_cast<int>(H);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* q = qkv + b * T * ld;
    const float* k = q + D;
    const float* v = q + 2 * D;
    const float* p = probs + b * H * T * T;
    const float* dout_b = dout + b * T * D;
    float* dq = dqkv + b * T * ld;
    float* dk = dq + D;
    float* dv = dq + 2 * D;
    // dP = dO V^T, dV = P^T dO
    TROUPE_RETURN_IF_ERROR(matmul_strided(handle, false, true, t, t, h, 1.0f, dout_b, D, hd, v, ld, hd, 0.0f, scratch,
                                          T, T * T, heads));
    TROUPE_RETURN_IF_ERROR(matmul_strided(handle, true, false, t, h, t, 1.0f, p, T, T * T, dout_b, D, hd, 0.0f, dv, ld,
                                          hd, heads));
    // dS = scale P (dP - rowsum(P dP)), zeros above the diagonal
    causal_softmax_backward_kernel<<<row_blocks(H * T), kRowThreads, 0, handle.stream()>>>(p, scratch, H * T, T, scale);
    TROUPE_LAUNCH_CHECK("causal_softmax_backward_kernel");
    // dQ = dS K, dK = dS^T Q
    TROUPE_RETURN_IF_ERROR(matmul_strided(handle, false, false, t, h, t, 1.0f, scratch, T, T * T, k, ld, hd, 0.0f, dq,
                                          ld, hd, heads));
    TROUPE_RETURN_IF_ERROR(matmul_strided(handle, true, false, t, h, t, 1.0f, scratch, T, T * T, q, ld, hd, 0.0f, dk,
                                          ld, hd, heads));
  }
  return {};
}

Status vocab_xent(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float grad_scale,
                  float* dlogits, float* row_loss, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("vocab_xent", {rows, vocab}));
  if (rows > 0 && vocab < 1) return invalid_argument("cuda::vocab_xent: a vocabulary of " + std::to_string(vocab));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("vocab_xent", static_cast<size_t>(rows), {logits, targets, row_loss}));
  if (rows == 0) return {};
  vocab_xent_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(logits, targets, rows, vocab, grad_scale, dlogits,
                                                                  row_loss);
  TROUPE_LAUNCH_CHECK("vocab_xent_kernel");
  return {};
}

Status sum_in_order(const float* x, int64_t n, float scale, bool accumulate, float* out, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("sum_in_order", {n}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("sum_in_order", 1, {out}));
  if (n > 0) TROUPE_RETURN_IF_ERROR(detail::check_pointers("sum_in_order", static_cast<size_t>(n), {x}));
  sum_in_order_kernel<<<1, 1, 0, stream>>>(x, n, scale, accumulate, out);
  TROUPE_LAUNCH_CHECK("sum_in_order_kernel");
  return {};
}

Status bias_grad_add(const float* dy, int64_t rows, int64_t cols, float* db, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("bias_grad_add", {rows, cols}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("bias_grad_add", static_cast<size_t>(rows * cols), {dy, db}));
  if (cols == 0 || rows == 0) return {};
  bias_grad_add_kernel<<<column_blocks(cols), 128, 0, stream>>>(dy, rows, cols, db);
  TROUPE_LAUNCH_CHECK("bias_grad_add_kernel");
  return {};
}

Status embed_forward(const int32_t* ids, const float* tok, const float* pos, int64_t rows, int64_t seq, int64_t dim,
                     float* x, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("embed_forward", {rows, seq, dim}));
  if (rows > 0 && seq < 1) return invalid_argument("cuda::embed_forward: seq must be >= 1");
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("embed_forward", static_cast<size_t>(rows * dim), {ids, tok, pos, x}));
  if (rows == 0 || dim == 0) return {};
  const size_t n = static_cast<size_t>(rows * dim);
  embed_forward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(ids, tok, pos, rows, seq, dim, x);
  TROUPE_LAUNCH_CHECK("embed_forward_kernel");
  return {};
}

Status embed_backward(const int32_t* ids, const float* dx, int64_t rows, int64_t seq, int64_t dim, float* dtok,
                      float* dpos, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("embed_backward", {rows, seq, dim}));
  if (rows > 0 && seq < 1) return invalid_argument("cuda::embed_backward: seq must be >= 1");
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("embed_backward", static_cast<size_t>(rows * dim), {ids, dx, dtok, dpos}));
  if (rows == 0 || dim == 0) return {};
  embed_backward_kernel<<<column_blocks(dim), 128, 0, stream>>>(ids, dx, rows, seq, dim, dtok, dpos);
  TROUPE_LAUNCH_CHECK("embed_backward_kernel");
  return {};
}

Status ids_from_floats(const float* x, int64_t n, int32_t* ids, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_sizes("ids_from_floats", {n}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("ids_from_floats", static_cast<size_t>(n), {x, ids}));
  if (n == 0) return {};
  ids_from_floats_kernel<<<detail::blocks_for(static_cast<size_t>(n)), detail::kThreads, 0, stream>>>(x, n, ids);
  TROUPE_LAUNCH_CHECK("ids_from_floats_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
