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
#include "kernels/cuda/conv_filter_grad.h"
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

// A convolution's three results computed in double, with, for each output, the root of the sum of
// its terms' squares and the number of terms: what an f32 result's rounding error is measured in.
struct Exact {
  std::vector<double> value, norm;
  double terms = 0;
};

// x [batch, in, h, w], w [out, in, k, k] -> y; dy -> dx, dw. Cross-correlation with zero padding,
// as kernels/cpu/conv.h.
void exact_conv(const cpu::Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& dy, Exact* y, Exact* dx, Exact* dw) {
  const int oh = s.out_height(), ow = s.out_width();
  y->value.assign(size_t(s.batch) * s.out_channels * oh * ow, 0.0);
  y->norm = y->value;
  dx->value.assign(x.size(), 0.0);
  dx->norm = dx->value;
  dw->value.assign(w.size(), 0.0);
  dw->norm = dw->value;
  y->terms = s.patch();
  dw->terms = double(s.batch) * oh * ow;
  dx->terms = double(s.out_channels) * s.kernel * s.kernel;  // at most
  for (int n = 0; n < s.batch; ++n)
    for (int o = 0; o < s.out_channels; ++o)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          const size_t yi = ((size_t(n) * s.out_channels + o) * oh + i) * ow + j;
          for (int c = 0; c < s.in_channels; ++c)
            for (int p = 0; p < s.kernel; ++p)
              for (int q = 0; q < s.kernel; ++q) {
                const int r = i * s.stride - s.pad + p, t = j * s.stride - s.pad + q;
                if (r < 0 || r >= s.height || t < 0 || t >= s.width) continue;
                const size_t xi = ((size_t(n) * s.in_channels + c) * s.height + r) * s.width + t;
                const size_t wi = ((size_t(o) * s.in_channels + c) * s.kernel + p) * s.kernel + q;
                const double fy = double(x[xi]) * w[wi], fw = double(x[xi]) * dy[yi], fx = double(w[wi]) * dy[yi];
                y->value[yi] += fy;
                y->norm[yi] += fy * fy;
                dw->value[wi] += fw;
                dw->norm[wi] += fw * fw;
                dx->value[xi] += fx;
                dx->norm[xi] += fx * fx;
              }
        }
  for (Exact* e : {y, dx, dw})
    for (double& v : e->norm) v = std::sqrt(v);
}

// Strict f32: each result within 8 f32 roundings of its terms' norm times the root of their
// count (a sum's error grows like that). TF32 (10-bit mantissas: ~5e-4 relative per product)
// misses this by an order of magnitude, so the check also says cuDNN did not use it.
void check_f32(const std::vector<float>& got, const Exact& ref) {
  REQUIRE(got.size() == ref.value.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 8 * test::kF32Eps * std::sqrt(ref.terms) * ref.norm[i] + 1e-30;
    if (!(std::fabs(got[i] - ref.value[i]) <= tol) && bad++ == 0) first = i;
  }
  INFO(bad << " of " << got.size() << " outside f32 rounding; first at " << first << ": "
           << (got.empty() ? 0.0 : got[first]) << " (gpu) vs " << (got.empty() ? 0.0 : ref.value[first]));
  CHECK(bad == 0);
}

TEST_CASE("cuDNN convolutions match cpu conv2d_forward and conv2d_backward", "[gpu][conv][cudnn]") {
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CudnnHandle h;
  Status made = h.create(stream.get());
  INFO(made.to_string());
  REQUIRE(made.ok());
  // The cnn's two blocks at batch 5 (the second also at 16: split into up to 16 groups), a 5x5
  // kernel, no padding with stride 2, one image.
  const cpu::Conv2dShape shapes[] = {{5, 1, 28, 28, 32, 3, 1, 1},  {5, 32, 14, 14, 64, 3, 1, 1},
                                     {16, 32, 14, 14, 64, 3, 1, 1},
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
    // The CPU kernels are the reference the GPU must match; exact sums bound both.
    std::vector<float> ws(cpu::conv2d_workspace_floats(s));
    std::vector<float> y(yn), dw(wn, 0.0f), dx(xn, 0.0f);
    cpu::conv2d_forward(s, x.data(), w.data(), nullptr, false, y.data(), ws.data());
    cpu::conv2d_backward(s, x.data(), w.data(), dy.data(), dw.data(), nullptr, dx.data(), ws.data());
    Exact ey, edx, edw;
    exact_conv(s, x, w, dy, &ey, &edx, &edw);
    check_f32(y, ey);  // the reference itself is within f32 rounding
    check_f32(dx, edx);
    check_f32(dw, edw);

    DeviceArray<float> gx(x), gw(w), gdy(dy), gy(yn), gdw(wn), gdx(xn);
    kc::DeviceBuffer<char> workspace;
    REQUIRE(workspace.allocate(std::max<size_t>(plan.workspace_bytes(), 1), "test workspace").ok());
    INFO(plan.describe());
    REQUIRE(plan.forward(h, gx.get(), gw.get(), gy.get(), workspace.get(), workspace.bytes()).ok());
    REQUIRE(plan.backward_filter(h, gx.get(), gdy.get(), gdw.get(), workspace.get(), workspace.bytes()).ok());
    REQUIRE(plan.backward_data(h, gw.get(), gdy.get(), gdx.get(), workspace.get(), workspace.bytes()).ok());
    REQUIRE(cudaStreamSynchronize(stream.get()) == cudaSuccess);
    check_f32(gy.host(), ey);
    check_f32(gdx.host(), edx);
    check_f32(gdw.host(), edw);

    // The strict filter gradient the cnn uses (one cuBLAS product over the batch's im2col): within
    // f32 rounding as well, and the same bits on every call (deterministic).
    kc::CublasHandle blas;
    REQUIRE(blas.create(stream.get()).ok());
    kc::DeviceBuffer<char> gemm_ws;
    REQUIRE(gemm_ws.allocate(kc::conv_filter_grad_workspace_bytes(s), "test workspace").ok());
    DeviceArray<float> gemm_dw(wn);
    REQUIRE(kc::conv_filter_grad(blas, s, gx.get(), gdy.get(), gemm_dw.get(), gemm_ws.get(), gemm_ws.bytes()).ok());
    REQUIRE(cudaStreamSynchronize(stream.get()) == cudaSuccess);
    const std::vector<float> first = gemm_dw.host();
    check_f32(first, edw);
    REQUIRE(kc::conv_filter_grad(blas, s, gx.get(), gdy.get(), gemm_dw.get(), gemm_ws.get(), gemm_ws.bytes()).ok());
    REQUIRE(cudaStreamSynchronize(stream.get()) == cudaSuccess);
    CHECK(gemm_dw.host() == first);
    CHECK(kc::conv_filter_grad(blas, s, gx.get(), gdy.get(), gemm_dw.get(), gemm_ws.get(), gemm_ws.bytes() - 1)
              .code() == Code::invalid_argument);
    // Split into groups of images (one product per group, the partials summed in a fixed order):
    // every split a batch allows is the same gradient within f32 rounding and deterministic.
    INFO("default split: " << kc::conv_filter_grad_parts(s) << " groups of a batch of " << s.batch);
    for (int parts = 1; parts <= s.batch; ++parts) {
      if (s.batch % parts != 0) continue;
      kc::DeviceBuffer<char> split_ws;
      REQUIRE(split_ws.allocate(kc::conv_filter_grad_workspace_bytes(s, parts), "test workspace").ok());
      INFO(parts << " groups");
      REQUIRE(
          kc::conv_filter_grad(blas, s, gx.get(), gdy.get(), gemm_dw.get(), split_ws.get(), split_ws.bytes(), parts)
              .ok());
      REQUIRE(cudaStreamSynchronize(stream.get()) == cudaSuccess);
      const std::vector<float> split = gemm_dw.host();
      check_f32(split, edw);
      REQUIRE(
          kc::conv_filter_grad(blas, s, gx.get(), gdy.get(), gemm_dw.get(), split_ws.get(), split_ws.bytes(), parts)
              .ok());
      REQUIRE(cudaStreamSynchronize(stream.get()) == cudaSuccess);
      CHECK(gemm_dw.host() == split);
    }
    if (s.batch > 1) {
      CHECK(kc::conv_filter_grad(blas, s, gx.get(), gdy.get(), gemm_dw.get(), gemm_ws.get(), gemm_ws.bytes(),
                                 s.batch + 1)
                .code() == Code::invalid_argument);
    }
    CHECK(kc::conv_filter_grad(blas, s, gx.get(), gdy.get(), gemm_dw.get(), gemm_ws.get(), gemm_ws.bytes(), -1)
              .code() == Code::invalid_argument);

    // With TF32 allowed: any algorithm, ~10 mantissa bits per product; still the same convolution
    // (within 1% of each output's terms' norm).
    kc::ConvPlan fast;
    REQUIRE(fast.create(h, s, /*tf32=*/true, size_t(64) << 20).ok());
    kc::DeviceBuffer<char> fast_ws;
    REQUIRE(fast_ws.allocate(std::max<size_t>(fast.workspace_bytes(), 1), "test workspace").ok());
    INFO(fast.describe());
    REQUIRE(fast.forward(h, gx.get(), gw.get(), gy.get(), fast_ws.get(), fast_ws.bytes()).ok());
    REQUIRE(fast.backward_filter(h, gx.get(), gdy.get(), gdw.get(), fast_ws.get(), fast_ws.bytes()).ok());
    REQUIRE(fast.backward_data(h, gw.get(), gdy.get(), gdx.get(), fast_ws.get(), fast_ws.bytes()).ok());
    REQUIRE(cudaStreamSynchronize(stream.get()) == cudaSuccess);
    for (auto [got, ref] : {std::pair{gy.host(), &ey}, {gdx.host(), &edx}, {gdw.host(), &edw}}) {
      size_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - ref->value[i]) <= 1e-2 * ref->norm[i] + 1e-30);
      CHECK(bad == 0);
    }
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
