// The convolutional blocks' GPU kernels against the kernels::cpu references: fused bias + ReLU +
// max pooling and its backward (bit for bit: same maxima, same arg-max on ties), per-channel bias
// sums, and cuDNN's convolutions (strict f32: to f32 rounding of the CPU's im2col + sgemm).
#include <cmath>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/conv_ops.h"
#ifdef TROUPE_WITH_CUDNN
#include "kernels/cuda/cudnn_conv.h"
#endif

namespace troupe {
namespace {

using test::DeviceArray;
namespace kc = kernels::cuda;
namespace cpu = kernels::cpu;

// Values on a coarse grid (multiples of 1/4 in [-2, 2]) so that windows hold ties, also ties at 0
// after the ReLU, which is where an arg-max rule shows.
std::vector<float> coarse(size_t n, uint64_t seed) {
  auto v = test::random_floats(n, seed, -2.0f, 2.0f);
  for (float& x : v) x = std::round(x * 4.0f) / 4.0f;
  return v;
}

struct PoolCase {
  int batch, channels, side, window;
};
const PoolCase kPools[] = {{1, 1, 2, 2}, {3, 2, 7, 2}, {4, 32, 28, 2}, {2, 64, 14, 2}, {5, 3, 9, 3}, {0, 4, 6, 2}};

TEST_CASE("cuda bias_relu_max_pool matches cpu ReLU(conv + bias) then max_pool_forward exactly", "[gpu][conv]") {
  for (const PoolCase& c : kPools) {
    CAPTURE(c.batch, c.channels, c.side, c.window);
    cpu::PoolShape s{c.batch * c.channels, c.side, c.side, c.window};
    const size_t in_n = size_t(s.planes) * c.side * c.side, out_n = size_t(s.planes) * s.out_height() * s.out_width();
    auto conv = coarse(in_n, in_n + 1);
    auto bias = coarse(size_t(c.channels), c.channels);
    std::vector<float> act = conv;  // the CPU's bias + ReLU, plane by plane
    for (size_t i = 0; i < in_n; ++i) {
      const float v = act[i] + bias[(i / (size_t(c.side) * c.side)) % c.channels];
      act[i] = v > 0.0f ? v : 0.0f;
    }
    std::vector<float> ref(out_n);
    std::vector<int32_t> ref_arg(out_n);
    cpu::max_pool_forward(s, act.data(), ref.data(), ref_arg.data());
    DeviceArray<float> dconv(conv), dbias(bias), dpooled(out_n);
    DeviceArray<int32_t> darg(out_n);
    REQUIRE(kc::bias_relu_max_pool(dconv.get(), dbias.get(), c.channels, s, dpooled.get(), darg.get()).ok());
    CHECK_SAME(dpooled.host(), ref);
    CHECK_SAME(darg.host(), ref_arg);
  }
  cpu::PoolShape bad{6, 4, 4, 2};
  CHECK(kc::bias_relu_max_pool(nullptr, nullptr, 4, bad, nullptr, nullptr).code() == Code::invalid_argument);
  bad.window = 0;
  CHECK(kc::bias_relu_max_pool(nullptr, nullptr, 1, bad, nullptr, nullptr).code() == Code::invalid_argument);
}

TEST_CASE("cuda max_pool_relu_backward matches cpu max_pool_backward then relu_backward exactly", "[gpu][conv]") {
  for (const PoolCase& c : kPools) {
    CAPTURE(c.batch, c.channels, c.side, c.window);
    cpu::PoolShape s{c.batch * c.channels, c.side, c.side, c.window};
    const size_t in_n = size_t(s.planes) * c.side * c.side, out_n = size_t(s.planes) * s.out_height() * s.out_width();
    // The forward on the CPU gives the ReLU output, the pooled output and the arg-max.
    auto act = coarse(in_n, in_n + 7);
    for (float& v : act) v = v > 0.0f ? v : 0.0f;
    std::vector<float> pooled(out_n);
    std::vector<int32_t> arg(out_n);
    cpu::max_pool_forward(s, act.data(), pooled.data(), arg.data());
    auto dpooled = test::random_floats(out_n, out_n + 3);
    std::vector<float> ref(in_n);
    cpu::max_pool_backward(s, dpooled.data(), arg.data(), ref.data());
    cpu::relu_backward(ref.data(), act.data(), in_n);
    DeviceArray<float> dd(dpooled), dp(pooled), dout(std::vector<float>(in_n, 123.0f));  // every element written
    DeviceArray<int32_t> da(arg);
    REQUIRE(kc::max_pool_relu_backward(dd.get(), dp.get(), da.get(), s, dout.get()).ok());
    CHECK_SAME(dout.host(), ref);
  }
}

TEST_CASE("cuda channel_sums matches the per-channel sums of cpu conv2d_backward", "[gpu][conv]") {
  for (auto [batch, channels, pixels] : {std::tuple{0, 3, 5}, {1, 1, 1}, {3, 7, 49}, {128, 32, 784}, {33, 64, 196}}) {
    CAPTURE(batch, channels, pixels);
    auto dy = test::random_floats(size_t(batch) * channels * pixels, batch * 7 + pixels);
    std::vector<double> ref(size_t(channels), 0.0);
    for (int n = 0; n < batch; ++n)
      for (int c = 0; c < channels; ++c)
        for (int p = 0; p < pixels; ++p) ref[c] += dy[(size_t(n) * channels + c) * pixels + p];
    DeviceArray<float> ddy(dy), db(std::vector<float>(size_t(channels), 99.0f));
    REQUIRE(kc::channel_sums(ddy.get(), batch, channels, pixels, db.get()).ok());
    auto got = db.host();
    const double count = double(batch) * pixels;
    for (int c = 0; c < channels; ++c) CHECK(got[c] == Approx(ref[c]).margin(count * 4 * test::kF32Eps + 1e-30));
    // Deterministic: the same input gives the same bits.
    REQUIRE(kc::channel_sums(ddy.get(), batch, channels, pixels, db.get()).ok());
    CHECK_SAME(db.host(), got);
  }
}

#ifdef TROUPE_WITH_CUDNN

// |got - ref| within a few f32 roundings of the sum of |terms| behind each output (bounded by
// `scale`, the largest magnitude of a product sum here).
void check_close(const std::vector<float>& got, const std::vector<float>& ref, double scale) {
  REQUIRE(got.size() == ref.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double(got[i]) - ref[i]) <= 1e-5 * scale + 1e-6)) {
      if (bad++ == 0) first = i;
    }
  }
  INFO(bad << " of " << got.size() << " differ; first at " << first << ": " << (got.empty() ? 0 : got[first])
           << " (gpu) vs " << (ref.empty() ? 0 : ref[first]));
  CHECK(bad == 0);
}

TEST_CASE("cuDNN convolutions match cpu conv2d_forward and conv2d_backward", "[gpu][conv][cudnn]") {
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CudnnHandle h;
  Status made = h.create(stream.get());
  INFO(made.to_string());
  REQUIRE(made.ok());
  // The cnn's two blocks at batch 5, a 5x5 kernel, no padding with stride 2, one image.
  const cpu::Conv2dShape shapes[] = {{5, 1, 28, 28, 32, 3, 1, 1}, {5, 32, 14, 14, 64, 3, 1, 1},
                                     {3, 2, 11, 11, 4, 5, 2, 1},  {2, 3, 9, 9, 5, 3, 0, 2},
                                     {1, 1, 4, 4, 1, 1, 0, 1}};
  for (const cpu::Conv2dShape& s : shapes) {
    CAPTURE(s.batch, s.in_channels, s.height, s.out_channels, s.kernel, s.pad, s.stride);
    REQUIRE(s.valid());
    kc::ConvPlan plan;
    Status st = plan.create(h, s, /*tf32=*/false, size_t(64) << 20);
    INFO(st.to_string());
    REQUIRE(st.ok());
    const size_t xn = size_t(s.batch) * s.in_channels * s.height * s.width;
    const size_t wn = size_t(s.out_channels) * s.patch();
    const size_t yn = size_t(s.batch) * s.out_channels * s.pixels();
    auto x = test::random_floats(xn, xn), w = test::random_floats(wn, wn + 1), dy = test::random_floats(yn, yn + 2);
    std::vector<float> ws(cpu::conv2d_workspace_floats(s));
    std::vector<float> y(yn), dw(wn, 0.0f), dx(xn, 0.0f);
    cpu::conv2d_forward(s, x.data(), w.data(), nullptr, false, y.data(), ws.data());
    cpu::conv2d_backward(s, x.data(), w.data(), dy.data(), dw.data(), nullptr, dx.data(), ws.data());

    DeviceArray<float> gx(x), gw(w), gdy(dy), gy(yn), gdw(wn), gdx(xn);
    kc::DeviceBuffer<char> workspace;
    REQUIRE(workspace.allocate(std::max<size_t>(plan.workspace_bytes(), 1), "test workspace").ok());
    INFO(plan.describe());
    REQUIRE(plan.forward(h, gx.get(), gw.get(), gy.get(), workspace.get(), workspace.bytes()).ok());
    REQUIRE(plan.backward_filter(h, gx.get(), gdy.get(), gdw.get(), workspace.get(), workspace.bytes()).ok());
    REQUIRE(plan.backward_data(h, gw.get(), gdy.get(), gdx.get(), workspace.get(), workspace.bytes()).ok());
    REQUIRE(cudaStreamSynchronize(stream.get()) == cudaSuccess);
    // Each output sums patch() products of values in [-1, 1]; a weight gradient sums batch x pixels.
    check_close(gy.host(), y, s.patch());
    check_close(gdx.host(), dx, double(s.out_channels) * s.kernel * s.kernel);
    check_close(gdw.host(), dw, double(s.batch) * s.pixels());
  }
  kc::ConvPlan bad;
  CHECK(bad.create(h, cpu::Conv2dShape{1, 1, 2, 2, 1, 5, 0, 1}, false, 1 << 20).code() == Code::invalid_argument);
}

#else

TEST_CASE("cuDNN convolutions: not built", "[gpu][conv][cudnn]") {
  WARN("SKIPPED: this troupe was built without cuDNN (cudnn.h / libcudnn not found at configure time); the GPU "
       "cnn is refused and its convolutions are not tested");
}

#endif

}  // namespace
}  // namespace troupe
