// Max pooling over non-overlapping windows, keeping where each maximum came from so backward routes
// the gradient to it alone.
#include <cstring>

#include "kernels/cpu/conv.h"

namespace troupe::kernels::cpu {

namespace {

// The 2 x 2 window of most networks, unrolled: the four candidates in the generic loop's order.
void max_pool_2x2(const PoolShape& s, const float* in, float* out, int32_t* arg) {
  const int oh_n = s.out_height(), ow_n = s.out_width(), w = s.width;
  for (int oh = 0; oh < oh_n; ++oh) {
    const float* r0 = in + 2 * oh * w;
    const float* r1 = r0 + w;
    for (int ow = 0; ow < ow_n; ++ow) {
      const int c = 2 * ow;
      float m = r0[c];
      int32_t at = 0;
      if (r0[c + 1] > m) m = r0[c + 1], at = 1;
      if (r1[c] > m) m = r1[c], at = w;
      if (r1[c + 1] > m) m = r1[c + 1], at = w + 1;
      out[oh * ow_n + ow] = m;
      arg[oh * ow_n + ow] = 2 * oh * w + c + at;
    }
  }
}

}  // namespace

void max_pool_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  const int oh_n = s.out_height(), ow_n = s.out_width(), win = s.window;
  const size_t in_plane = static_cast<size_t>(s.height) * s.width, out_plane = static_cast<size_t>(oh_n) * ow_n;
  for (int pl = 0; pl < s.planes; ++pl) {
    const float* in = x + pl * in_plane;
    float* out = y + pl * out_plane;
    int32_t* arg = argmax + pl * out_plane;
    if (win == 2) {
      max_pool_2x2(s, in, out, arg);
      continue;
    }
    for (int oh = 0; oh < oh_n; ++oh) {
      for (int ow = 0; ow < ow_n; ++ow) {
        int32_t best = oh * win * s.width + ow * win;  // the window's top-left element
        for (int i = 0; i < win; ++i) {
          const int32_t row = (oh * win + i) * s.width + ow * win;
          for (int j = 0; j < win; ++j) {
            if (in[row + j] > in[best]) best = row + j;
          }
        }
        out[oh * ow_n + ow] = in[best];
        arg[oh * ow_n + ow] = best;
      }
    }
  }
}

void max_pool_backward(const PoolShape& s, const float* dy, const int32_t* argmax, float* dx) {
  const size_t in_plane = static_cast<size_t>(s.height) * s.width,
               out_plane = static_cast<size_t>(s.out_height()) * s.out_width();
  if (s.window == 2 && s.height % 2 == 0 && s.width % 2 == 0) {
    // Windows tile the plane: write each window whole (its gradient at the arg-max, zeros around
    // it), one pass instead of clearing dx first.
    const int w = s.width, oh_n = s.out_height(), ow_n = s.out_width();
    for (int pl = 0; pl < s.planes; ++pl) {
      float* to = dx + pl * in_plane;
      const float* from = dy + pl * out_plane;
      const int32_t* arg = argmax + pl * out_plane;
      for (int oh = 0; oh < oh_n; ++oh) {
        for (int ow = 0; ow < ow_n; ++ow) {
          const int32_t corner = 2 * oh * w + 2 * ow, o = oh * ow_n + ow;
          to[corner] = to[corner + 1] = to[corner + w] = to[corner + w + 1] = 0.0f;
          to[arg[o]] = from[o];
        }
      }
    }
    return;
  }
  std::memset(dx, 0, sizeof(float) * in_plane * (s.planes > 0 ? s.planes : 0));
  for (int pl = 0; pl < s.planes; ++pl) {
    float* to = dx + pl * in_plane;
    const float* from = dy + pl * out_plane;
    const int32_t* arg = argmax + pl * out_plane;
    for (size_t o = 0; o < out_plane; ++o) to[arg[o]] += from[o];
  }
}

}  // namespace troupe::kernels::cpu
