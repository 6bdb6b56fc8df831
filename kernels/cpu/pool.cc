// Max pooling over non-overlapping windows, keeping where each maximum came from so backward routes
// the gradient to it alone.
#include <cstring>

#include "kernels/cpu/conv.h"

namespace troupe::kernels::cpu {

void max_pool_forward(const PoolShape& s, const float* x, float* y, int32_t* argmax) {
  const int oh_n = s.out_height(), ow_n = s.out_width(), win = s.window;
  const size_t in_plane = static_cast<size_t>(s.height) * s.width, out_plane = static_cast<size_t>(oh_n) * ow_n;
  for (int pl = 0; pl < s.planes; ++pl) {
    const float* in = x + pl * in_plane;
    float* out = y + pl * out_plane;
    int32_t* arg = argmax + pl * out_plane;
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
  std::memset(dx, 0, sizeof(float) * in_plane * (s.planes > 0 ? s.planes : 0));
  for (int pl = 0; pl < s.planes; ++pl) {
    float* to = dx + pl * in_plane;
    const float* from = dy + pl * out_plane;
    const int32_t* arg = argmax + pl * out_plane;
    for (size_t o = 0; o < out_plane; ++o) to[arg[o]] += from[o];
  }
}

}  // namespace troupe::kernels::cpu
