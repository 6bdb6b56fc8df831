// CPU kernels of convolutional layers on NCHW batches (batch, channels, height, width; row-major, so
// one image's channel plane is height x width contiguous floats): 2-D convolution through im2col +
// the sgemm of ops.h, and max pooling with the arg-max kept for backward. Same rules as ops.h: raw
// pointers, callers own all memory (a convolution's scratch included), distinct arguments do not
// overlap, sizes of zero do nothing. Threads: the matrix products run on the BLAS's threads
// (set_blas_threads); the copies around them are single-threaded and small beside them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::kernels::cpu {

// A convolution of `batch` images of in_channels x height x width with out_channels filters of
// in_channels x kernel x kernel, zero padding `pad` on every side, step `stride`. Weights are
// [out_channels x in_channels x kernel x kernel] (OIHW, i.e. an out_channels x patch() matrix),
// the bias [out_channels], the output [batch x out_channels x out_height() x out_width()].
struct Conv2dShape {
  int batch = 0;
  int in_channels = 0, height = 0, width = 0;
  int out_channels = 0, kernel = 0;
  int pad = 0, stride = 1;

  int out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
  int out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
  int patch() const { return in_channels * kernel * kernel; }  // rows of the im2col matrix
  int pixels() const { return out_height() * out_width(); }    // columns of one image's im2col matrix
  // All dimensions > 0 (batch >= 0), pad >= 0, stride >= 1, and the kernel fits the padded image.
  bool valid() const;
};

// The im2col matrix of one image [in_channels x height x width]: col[r, p] for r = (c, i, j) in
// patch() rows and p = (oh, ow) in pixels() columns is the input under filter tap (i, j) of channel c
// at output pixel p (0 in the padding). Row r starts at col + r * ld (ld >= pixels()), so several
// images' matrices can sit side by side.
void im2col(const float* image, const Conv2dShape& s, float* col, size_t ld);
// The adjoint of im2col: ADDS every col[r, p] into the image element it was read from.
void col2im(const float* col, const Conv2dShape& s, size_t ld, float* image);

// Scratch floats conv2d_forward and conv2d_backward need for shape `s` (they work on a few images
// at a time, so it does not grow with the batch beyond that).
size_t conv2d_workspace_floats(const Conv2dShape& s);

// y = conv(x, w) + bias (bias may be null: none), then max(y, 0) when relu. `workspace` holds
// conv2d_workspace_floats(s) floats. A shape that is not valid() does nothing.
void conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, bool relu, float* y,
                    float* workspace);

// Backward of conv2d_forward without the ReLU (apply relu_backward to dy first) for the loss
// gradient dy [batch x out_channels x out_height x out_width]: ADDS the weight gradient into dw and
// the bias gradient into db (db may be null), and writes the input gradient into dx unless dx is
// null (the first layer's is never needed). `workspace` as for conv2d_forward.
void conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* dy, float* dw, float* db,
                     float* dx, float* workspace);

// Max pooling of `planes` (batch x channels) planes of height x width over non-overlapping
// window x window squares: y has height / window x width / window per plane (rows and columns
// that do not fill a window are dropped). argmax[o] receives the index within its input plane
// (h * width + w) of the maximum of output o (the first one on ties).
struct PoolShape {
  int planes = 0, height = 0, width = 0, window = 2;
  int out_height() const { return height / window; }
  int out_width() const { return width / window; }
};
void max_pool_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax);
// dx = 0 except dx[argmax[o]] += dy[o] in each plane (dx has the input's size, overwritten).
void max_pool_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx);

}  // namespace troupe::kernels::cpu
