// Convolution kernels (kernels/cpu/conv.h) against the definition, computed here in double by
// direct loops over every output and tap: forward (bias, ReLU), the weight, bias and input
// gradients, and im2col/col2im as adjoints. Shapes are odd on purpose (batch 3, channels that are
// no multiple of a vector width, non-square images, padding 0 and > 0, strides 1 and 2), and one
// shape is large enough that the kernels split the batch into chunks with a partial last one.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

namespace {

cpu::Conv2dShape shape(int batch, int cin, int h, int w, int cout, int kernel, int pad, int stride) {
  cpu::Conv2dShape s;
  s.batch = batch;
  s.in_channels = cin;
  s.height = h;
  s.width = w;
  s.out_channels = cout;
  s.kernel = kernel;
  s.pad = pad;
  s.stride = stride;
  return s;
}

std::string describe(const cpu::Conv2dShape& s) {
  std::ostringstream os;
  os << "batch " << s.batch << ", " << s.in_channels << "x" << s.height << "x" << s.width << " -> " << s.out_channels
     << " filters " << s.kernel << "x" << s.kernel << ", pad " << s.pad << ", stride " << s.stride;
  return os.str();
}

size_t input_size(const cpu::Conv2dShape& s) { return static_cast<size_t>(s.batch) * s.in_channels * s.height * s.width; }
size_t output_size(const cpu::Conv2dShape& s) { return static_cast<size_t>(s.batch) * s.out_channels * s.pixels(); }
size_t weight_size(const cpu::Conv2dShape& s) { return static_cast<size_t>(s.out_channels) * s.patch(); }

// Calls tap(x_index, w_index, y_index) for every (input, weight, output) triple of the convolution
// whose input lies inside the image (padding contributes nothing).
template <class Tap>
void for_each_tap(const cpu::Conv2dShape& s, Tap&& tap) {
  const int oh_n = s.out_height(), ow_n = s.out_width(), k = s.kernel;
  for (int n = 0; n < s.batch; ++n)
    for (int o = 0; o < s.out_channels; ++o)
      for (int oh = 0; oh < oh_n; ++oh)
        for (int ow = 0; ow < ow_n; ++ow)
          for (int c = 0; c < s.in_channels; ++c)
            for (int i = 0; i < k; ++i)
              for (int j = 0; j < k; ++j) {
                const int ih = oh * s.stride - s.pad + i, iw = ow * s.stride - s.pad + j;
                if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) continue;
                const size_t xi = ((static_cast<size_t>(n) * s.in_channels + c) * s.height + ih) * s.width + iw;
                const size_t wi = ((static_cast<size_t>(o) * s.in_channels + c) * k + i) * k + j;
                const size_t yi = ((static_cast<size_t>(n) * s.out_channels + o) * oh_n + oh) * ow_n + ow;
                tap(xi, wi, yi);
              }
}

std::vector<double> reference_forward(const cpu::Conv2dShape& s, const std::vector<float>& x,
                                      const std::vector<float>& w, const std::vector<float>& b, bool relu) {
  std::vector<double> y(output_size(s));
  for (size_t i = 0; i < y.size(); ++i) y[i] = b[(i / s.pixels()) % s.out_channels];
  for_each_tap(s, [&](size_t xi, size_t wi, size_t yi) { y[yi] += static_cast<double>(x[xi]) * w[wi]; });
  if (relu)
    for (double& v : y) v = v < 0 ? 0 : v;
  return y;
}

// The shapes every case runs on.
std::vector<cpu::Conv2dShape> shapes() {
  return {
      shape(3, 3, 7, 6, 5, 3, 0, 1),   // no padding
      shape(3, 3, 7, 6, 5, 3, 1, 1),   // "same" padding
      shape(3, 5, 9, 8, 7, 5, 2, 1),   // 5x5, pad 2
      shape(3, 3, 7, 6, 5, 3, 1, 2),   // stride 2, odd image
      shape(3, 2, 8, 9, 3, 4, 3, 2),   // even kernel, padding larger than half of it
      shape(1, 1, 5, 5, 1, 1, 0, 1),   // 1x1
      shape(3, 7, 24, 24, 6, 5, 2, 1), // several images per chunk, a partial last chunk
  };
}

}  // namespace

TEST_CASE("conv2d_forward matches the direct convolution, with bias and ReLU", "[conv]") {
  for (const cpu::Conv2dShape& s : shapes()) {
    for (bool relu : {false, true}) {
      INFO(describe(s) << (relu ? ", relu" : ""));
      auto x = random_floats(input_size(s), 1);
      auto w = random_floats(weight_size(s), 2);
      auto b = random_floats(s.out_channels, 3);
      std::vector<float> y(output_size(s), 7.0f), work(cpu::conv2d_workspace_floats(s));
      cpu::conv2d_forward(s, x.data(), w.data(), b.data(), relu, y.data(), work.data());
      REQUIRE(first_difference(y, reference_forward(s, x, w, b, relu), 1e-4, 1e-4) == "");
    }
  }
}

TEST_CASE("conv2d_forward without a bias adds none", "[conv]") {
  const cpu::Conv2dShape s = shape(3, 3, 7, 6, 5, 3, 1, 1);
  auto x = random_floats(input_size(s), 4);
  auto w = random_floats(weight_size(s), 5);
  std::vector<float> zero_bias(s.out_channels, 0.0f), y(output_size(s)), work(cpu::conv2d_workspace_floats(s));
  cpu::conv2d_forward(s, x.data(), w.data(), nullptr, false, y.data(), work.data());
  REQUIRE(first_difference(y, reference_forward(s, x, w, zero_bias, false), 1e-4, 1e-4) == "");
}

TEST_CASE("conv2d_backward adds the weight and bias gradients and writes the input gradient", "[conv]") {
  for (const cpu::Conv2dShape& s : shapes()) {
    INFO(describe(s));
    auto x = random_floats(input_size(s), 11);
    auto w = random_floats(weight_size(s), 12);
    auto dy = random_floats(output_size(s), 13);
    // dw and db start non-zero: the kernel must add to them.
    auto dw = random_floats(weight_size(s), 14);
    auto db = random_floats(s.out_channels, 15);
    std::vector<double> want_dw(dw.begin(), dw.end()), want_db(db.begin(), db.end()), want_dx(input_size(s), 0.0);
    for_each_tap(s, [&](size_t xi, size_t wi, size_t yi) {
      want_dw[wi] += static_cast<double>(dy[yi]) * x[xi];
      want_dx[xi] += static_cast<double>(dy[yi]) * w[wi];
    });
    for (size_t i = 0; i < dy.size(); ++i) want_db[(i / s.pixels()) % s.out_channels] += dy[i];

    std::vector<float> dx(input_size(s), 9.0f), work(cpu::conv2d_workspace_floats(s));
    cpu::conv2d_backward(s, x.data(), w.data(), dy.data(), dw.data(), db.data(), dx.data(), work.data());
    CHECK(first_difference(dw, want_dw, 1e-4, 1e-4) == "");
    CHECK(first_difference(db, want_db, 1e-4, 1e-4) == "");
    CHECK(first_difference(dx, want_dx, 1e-4, 1e-4) == "");

    // Without dx and db (a first layer, a convolution without bias) the weight gradient is the same.
    std::vector<float> dw2 = random_floats(weight_size(s), 14);
    cpu::conv2d_backward(s, x.data(), w.data(), dy.data(), dw2.data(), nullptr, nullptr, work.data());
    CHECK(first_difference(dw2, want_dw, 1e-4, 1e-4) == "");
  }
}

TEST_CASE("col2im is the adjoint of im2col", "[conv]") {
  // <im2col(x), c> == <x, col2im(c)> for any x and c: col2im adds back exactly what im2col read.
  for (cpu::Conv2dShape s : shapes()) {
    s.batch = 1;
    INFO(describe(s));
    const size_t ld = static_cast<size_t>(s.pixels()) + 3;  // a padded leading dimension
    auto x = random_floats(input_size(s), 21);
    auto c = random_floats(static_cast<size_t>(s.patch()) * ld, 22);
    std::vector<float> col(c.size(), 0.0f), back(x.size(), 0.0f);
    cpu::im2col(x.data(), s, col.data(), ld);
    cpu::col2im(c.data(), s, ld, back.data());
    double lhs = 0, rhs = 0;
    for (int r = 0; r < s.patch(); ++r)
      for (int p = 0; p < s.pixels(); ++p) lhs += static_cast<double>(col[r * ld + p]) * c[r * ld + p];
    for (size_t i = 0; i < x.size(); ++i) rhs += static_cast<double>(x[i]) * back[i];
    CHECK(lhs == Approx(rhs).epsilon(1e-5));
    // The padding of ld is left alone.
    for (int r = 0; r < s.patch(); ++r) REQUIRE(col[r * ld + s.pixels()] == 0.0f);
  }
}

TEST_CASE("Conv2dShape computes output sizes and refuses kernels larger than the padded image", "[conv]") {
  const cpu::Conv2dShape s = shape(2, 1, 28, 28, 8, 5, 2, 1);
  CHECK(s.out_height() == 28);
  CHECK(s.patch() == 25);
  CHECK(shape(2, 1, 7, 7, 8, 3, 1, 2).out_width() == 4);
  CHECK(s.valid());
  CHECK_FALSE(shape(2, 1, 3, 3, 8, 5, 0, 1).valid());
  CHECK_FALSE(shape(2, 1, 3, 3, 8, 3, 0, 0).valid());
  CHECK(cpu::conv2d_workspace_floats(shape(2, 1, 3, 3, 8, 5, 0, 1)) == 0);
}
