// 2-D convolution on the CPU as matrix products: each image is unrolled into its im2col matrix
// [patch x pixels], so the convolution of a few images at once is one sgemm
//   out [out_channels x images*pixels] = W [out_channels x patch] * col [patch x images*pixels]
// and backward is two more: dW += dY col^T, dcol = W^T dY, folded back into the images by col2im.
// Images are taken a few at a time (a "chunk") so the col matrix stays about as large as a core's
// L2 cache while the products stay large enough for the BLAS to run near its peak.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/ops.h"

namespace troupe::kernels::cpu {
namespace {

// The col matrix of a chunk is kept near this many floats (1 MiB); one image's may exceed it.
constexpr size_t kChunkColFloats = size_t{1} << 18;

// Images per chunk for shape s: as many as fit kChunkColFloats, at least 1, at most the batch.
int chunk_images(const Conv2dShape& s) {
  const size_t per_image = static_cast<size_t>(s.patch()) * s.pixels();
  const size_t fit = std::max<size_t>(1, kChunkColFloats / per_image);
  return static_cast<int>(std::min<size_t>(fit, static_cast<size_t>(std::max(s.batch, 1))));
}

// The smallest o >= 0 with o * stride >= a.
int first_at_least(int a, int stride) { return a <= 0 ? 0 : (a + stride - 1) / stride; }

// Calls visit(row, in, lo, hi) for every row (c, i, j) of the im2col matrix and output row oh:
// `row` points at the col entries of that output row (out_width() of them), `in` is the index in
// the image of the input under output column 0 (it may lie outside: only columns [lo, hi) read
// inside the image, at in + ow * stride), or -1 when the whole output row reads padding.
template <class T, class Visit>
void for_each_col_row(const Conv2dShape& s, T* col, size_t ld, Visit&& visit) {
  const int k = s.kernel, oh_n = s.out_height(), ow_n = s.out_width();
  for (int c = 0; c < s.in_channels; ++c) {
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) {
        T* row = col + static_cast<size_t>((c * k + i) * k + j) * ld;
        // Output columns whose input column ow * stride - pad + j lies in [0, width).
        const int lo = std::min(ow_n, first_at_least(s.pad - j, s.stride));
        const int hi = std::max(lo, std::min(ow_n, first_at_least(s.width + s.pad - j, s.stride)));
        for (int oh = 0; oh < oh_n; ++oh) {
          const int ih = oh * s.stride - s.pad + i;
          const bool inside = ih >= 0 && ih < s.height;
          const long in = inside ? (static_cast<long>(c) * s.height + ih) * s.width - s.pad + j : -1;
          visit(row + static_cast<size_t>(oh) * ow_n, in, inside ? lo : 0, inside ? hi : 0);
        }
      }
    }
  }
}

}  // namespace

bool Conv2dShape::valid() const {
  return batch >= 0 && in_channels > 0 && height > 0 && width > 0 && out_channels > 0 && kernel > 0 && pad >= 0 &&
         stride >= 1 && kernel <= height + 2 * pad && kernel <= width + 2 * pad;
}

namespace {

// im2col of a "same" convolution (stride 1, output as wide as the input): each col row is the
// channel plane shifted by (i - pad) rows and (j - pad) columns, so it is one contiguous copy,
// after which the output rows that read padding and the columns that wrapped into a neighbouring
// row are zeroed.
void im2col_same(const float* image, const Conv2dShape& s, float* col, size_t ld) {
  const int k = s.kernel, w = s.width, h = s.height, pad = s.pad;
  const long plane = static_cast<long>(h) * w;
  for (int c = 0; c < s.in_channels; ++c) {
    const float* in = image + c * plane;
    for (int i = 0; i < k; ++i) {
      const int oh_lo = std::max(0, pad - i), oh_hi = std::max(oh_lo, std::min(h, h + pad - i));
      for (int j = 0; j < k; ++j) {
        float* out = col + static_cast<size_t>((c * k + i) * k + j) * ld;
        const long shift = static_cast<long>(i - pad) * w + (j - pad);
        // Output q reads input q + shift; clipped to the plane (what is clipped is zeroed below).
        const long q_lo = std::max<long>(static_cast<long>(oh_lo) * w, -shift);
        const long q_hi = std::min<long>(static_cast<long>(oh_hi) * w, plane - shift);
        std::fill(out, out + q_lo, 0.0f);
        if (q_hi > q_lo) std::memcpy(out + q_lo, in + q_lo + shift, sizeof(float) * static_cast<size_t>(q_hi - q_lo));
        std::fill(out + std::max(q_lo, q_hi), out + plane, 0.0f);
        const int lo = std::max(0, pad - j), hi = std::min(w, w + pad - j);  // columns inside
        for (int oh = oh_lo; oh < oh_hi; ++oh) {
          float* row = out + static_cast<long>(oh) * w;
          for (int ow = 0; ow < lo; ++ow) row[ow] = 0.0f;
          for (int ow = hi; ow < w; ++ow) row[ow] = 0.0f;
        }
      }
    }
  }
}

}  // namespace

void im2col(const float* image, const Conv2dShape& s, float* col, size_t ld) {
  const int ow_n = s.out_width(), stride = s.stride;
  if (stride == 1 && ow_n == s.width && s.out_height() == s.height) return im2col_same(image, s, col, ld);
  // Rows are short (an output row: 7 to 28 floats here), so plain loops beat memcpy/memset calls.
  for_each_col_row(s, col, ld, [&](float* out, long in, int lo, int hi) {
    for (int ow = 0; ow < lo; ++ow) out[ow] = 0.0f;
    if (stride == 1) {
      for (int ow = lo; ow < hi; ++ow) out[ow] = image[in + ow];
    } else {
      for (int ow = lo; ow < hi; ++ow) out[ow] = image[in + static_cast<long>(ow) * stride];
    }
    for (int ow = hi; ow < ow_n; ++ow) out[ow] = 0.0f;
  });
}

void col2im(const float* col, const Conv2dShape& s, size_t ld, float* image) {
  const int stride = s.stride;
  for_each_col_row(s, col, ld, [&](const float* from, long in, int lo, int hi) {
    if (stride == 1) {  // a loop the compiler vectorises
      for (int ow = lo; ow < hi; ++ow) image[in + ow] += from[ow];
    } else {
      for (int ow = lo; ow < hi; ++ow) image[in + static_cast<long>(ow) * stride] += from[ow];
    }
  });
}

size_t conv2d_workspace_floats(const Conv2dShape& s) {
  if (!s.valid()) return 0;
  // The chunk's col matrix, then its output (or output gradient) as an out_channels x columns matrix.
  const size_t columns = static_cast<size_t>(chunk_images(s)) * s.pixels();
  return columns * (static_cast<size_t>(s.patch()) + s.out_channels);
}

namespace {

// A chunk of images [first, first + count) with their im2col matrices side by side in `col`
// [patch x ld], and `mat` [out_channels x ld] for their output or output gradient.
struct Chunk {
  int first = 0, count = 0;
  size_t ld = 0;
  float* col = nullptr;
  float* mat = nullptr;
};

// Unrolls the batch chunk by chunk into the workspace and calls body(chunk) for each.
template <class Body>
void for_each_chunk(const Conv2dShape& s, const float* x, float* workspace, Body&& body) {
  const int chunk = chunk_images(s), P = s.pixels();
  const size_t image = static_cast<size_t>(s.in_channels) * s.height * s.width;
  Chunk c;
  c.col = workspace;
  c.mat = workspace + static_cast<size_t>(chunk) * P * s.patch();
  for (c.first = 0; c.first < s.batch; c.first += chunk) {
    c.count = std::min(chunk, s.batch - c.first);
    c.ld = static_cast<size_t>(c.count) * P;
    for (int i = 0; i < c.count; ++i) im2col(x + (c.first + i) * image, s, c.col + static_cast<size_t>(i) * P, c.ld);
    body(c);
  }
}

}  // namespace

void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, bool relu, float* y,
                    float* workspace) {
  if (!s.valid() || s.batch == 0) return;
  const int K = s.out_channels, P = s.pixels();
  for_each_chunk(s, x, workspace, [&](const Chunk& c) {
    matmul(false, false, K, static_cast<int>(c.ld), s.patch(), 1.0f, w, c.col, 0.0f, c.mat);
    // mat[k, i * P + p] -> y[first + i, k, p], adding the bias and applying the ReLU on the way.
    for (int i = 0; i < c.count; ++i) {
      for (int k = 0; k < K; ++k) {
        const float* from = c.mat + k * c.ld + static_cast<size_t>(i) * P;
        float* to = y + (static_cast<size_t>(c.first + i) * K + k) * P;
        const float b = bias ? bias[k] : 0.0f;
        for (int p = 0; p < P; ++p) {
          const float v = from[p] + b;
          to[p] = relu && v < 0.0f ? 0.0f : v;
        }
      }
    }
  });
}

void conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* dy, float* dw, float* db,
                     float* dx, float* workspace) {
  if (!s.valid() || s.batch == 0) return;
  const int K = s.out_channels, P = s.pixels(), R = s.patch();
  const size_t image = static_cast<size_t>(s.in_channels) * s.height * s.width;
  for_each_chunk(s, x, workspace, [&](const Chunk& c) {
    // dy[first + i, k, p] -> mat[k, i * P + p], summing the bias gradient on the way.
    for (int i = 0; i < c.count; ++i) {
      for (int k = 0; k < K; ++k) {
        const float* from = dy + (static_cast<size_t>(c.first + i) * K + k) * P;
        std::memcpy(c.mat + k * c.ld + static_cast<size_t>(i) * P, from, sizeof(float) * P);
        if (db) {
          float sum = 0.0f;
          for (int p = 0; p < P; ++p) sum += from[p];
          db[k] += sum;
        }
      }
    }
    matmul(false, true, K, R, static_cast<int>(c.ld), 1.0f, c.mat, c.col, 1.0f, dw);  // dW += dY col^T
    if (!dx) return;
    matmul(true, false, R, static_cast<int>(c.ld), K, 1.0f, w, c.mat, 0.0f, c.col);  // dcol = W^T dY
    for (int i = 0; i < c.count; ++i) {
      float* to = dx + (c.first + i) * image;
      std::memset(to, 0, sizeof(float) * image);
      col2im(c.col + static_cast<size_t>(i) * P, s, c.ld, to);
    }
  });
}

}  // namespace troupe::kernels::cpu
