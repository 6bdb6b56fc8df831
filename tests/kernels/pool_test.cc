// Max pooling (kernels/cpu/conv.h) against loops written here: outputs, the arg-max indices (first
// maximum on ties), dropped edge rows and columns, and backward routing each gradient to its
// maximum only.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/cpu/conv.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

namespace {

cpu::PoolShape pool(int planes, int h, int w, int window) {
  cpu::PoolShape s;
  s.planes = planes;
  s.height = h;
  s.width = w;
  s.window = window;
  return s;
}

// Index within plane p (h * width + w) of the first maximum of window (oh, ow), by the definition.
int32_t window_argmax(const std::vector<float>& x, const cpu::PoolShape& s, int p, int oh, int ow) {
  const float* plane = x.data() + static_cast<size_t>(p) * s.height * s.width;
  int32_t best = -1;
  for (int i = 0; i < s.window; ++i)
    for (int j = 0; j < s.window; ++j) {
      const int32_t at = (oh * s.window + i) * s.width + ow * s.window + j;
      if (best < 0 || plane[at] > plane[best]) best = at;
    }
  return best;
}

}  // namespace

TEST_CASE("max_pool_forward takes each window's maximum and where it was", "[pool]") {
  // 3 images x 5 channels; odd sizes drop the last row / column; window 3 too.
  for (const cpu::PoolShape& s : {pool(15, 8, 6, 2), pool(15, 7, 5, 2), pool(6, 9, 7, 3), pool(2, 2, 2, 2)}) {
    INFO(s.planes << " planes of " << s.height << "x" << s.width << ", window " << s.window);
    auto x = random_floats(static_cast<size_t>(s.planes) * s.height * s.width, 31);
    const size_t out = static_cast<size_t>(s.planes) * s.out_height() * s.out_width();
    std::vector<float> y(out), want(out);
    std::vector<int32_t> arg(out), want_arg(out);
    size_t o = 0;
    for (int p = 0; p < s.planes; ++p)
      for (int oh = 0; oh < s.out_height(); ++oh)
        for (int ow = 0; ow < s.out_width(); ++ow, ++o) {
          want_arg[o] = window_argmax(x, s, p, oh, ow);
          want[o] = x[static_cast<size_t>(p) * s.height * s.width + want_arg[o]];
        }
    cpu::max_pool_forward(s, x.data(), y.data(), arg.data());
    REQUIRE(first_difference(y, want, 0, 0) == "");
    REQUIRE(arg == want_arg);
  }
}

TEST_CASE("max_pool_forward picks the first of equal maxima", "[pool]") {
  const std::vector<float> x = {1, 3, 3, 0,   //
                                3, 2, 3, 3};  // one plane of 2 x 4: windows {1,3,3,2} and {3,0,3,3}
  std::vector<float> y(2);
  std::vector<int32_t> arg(2);
  cpu::max_pool_forward(pool(1, 2, 4, 2), x.data(), y.data(), arg.data());
  CHECK(y == std::vector<float>{3, 3});
  CHECK(arg == std::vector<int32_t>{1, 2});
}

TEST_CASE("max_pool_backward routes each gradient to its window's maximum", "[pool]") {
  for (const cpu::PoolShape& s : {pool(15, 8, 6, 2), pool(15, 7, 5, 2), pool(6, 9, 7, 3)}) {
    const size_t in = static_cast<size_t>(s.planes) * s.height * s.width;
    const size_t out = static_cast<size_t>(s.planes) * s.out_height() * s.out_width();
    auto x = random_floats(in, 41);
    auto dy = random_floats(out, 42);
    std::vector<float> y(out), dx(in, 5.0f);
    std::vector<int32_t> arg(out);
    cpu::max_pool_forward(s, x.data(), y.data(), arg.data());
    cpu::max_pool_backward(s, dy.data(), arg.data(), dx.data());
    // The definition: dx[e] = dy[o] when element e is the maximum of window o (random values have
    // no ties), else 0: the old contents of dx are overwritten.
    std::vector<float> want(in, 0.0f);
    size_t o = 0;
    for (int p = 0; p < s.planes; ++p)
      for (int oh = 0; oh < s.out_height(); ++oh)
        for (int ow = 0; ow < s.out_width(); ++ow, ++o)
          want[static_cast<size_t>(p) * s.height * s.width + window_argmax(x, s, p, oh, ow)] = dy[o];
    REQUIRE(first_difference(dx, want, 0, 0) == "");
  }
}
