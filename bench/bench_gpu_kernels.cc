// bench_gpu_kernels: how close the training step's largest kernels come to what this GPU can do.
//
//   bench_gpu_kernels [--batches 128,1024] [--reps 200]
//
// First the ceilings, measured here: cuBLAS sgemm (strict f32) and bf16 GemmEx at 8192^3, and a
// device-to-device copy (bytes read + written per second). Then, replayed from CUDA graphs (the
// way training runs them), each kernel's time per call and its achieved fraction of the ceiling
// that bounds it: the MLP's matrix products (f32 and bf16) against the matmul peak, the cnn's cuDNN
// convolutions (forward, backward-data, backward-filter) against the f32 peak, and the memory-bound
// kernels (fused bias+ReLU+pool and its backward, the Adam step over the cnn's parameters) against
// the copy bandwidth. Every result is checked finite.
#include <cstdio>
#include <cstdlib>

#ifndef TROUPE_WITH_CUDA
int main() {
  std::fprintf(stderr, "bench_gpu_kernels: troupe was built without CUDA; nothing to measure\n");
  return 77;
}
#else

#include <CLI/CLI.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/device.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/conv_ops.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/runtime.h"
#include "models/cnn/cnn.h"
#ifdef TROUPE_WITH_CUDNN
#include "kernels/cuda/conv_filter_grad.h"
#include "kernels/cuda/cudnn_conv.h"
#endif

namespace {

using namespace troupe;  // NOLINT: a benchmark driver
namespace kc = kernels::cuda;
using Enqueue = std::function<Status()>;

// Microseconds per call of `enqueue`, captured `reps` times in one graph and replayed (one warm-up
// replay, then the median of three timed ones). -1 on a failure, which is printed.
double time_us(cudaStream_t s, int reps, const Enqueue& enqueue, const std::string& what) {
  kc::GraphExec graph;
  Status st = graph.capture(s, [&](cudaStream_t) -> Status {
    for (int i = 0; i < reps; ++i) TROUPE_RETURN_IF_ERROR(enqueue());
    return {};
  });
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  std::vector<double> us;
  for (int pass = 0; pass < 4 && st.ok(); ++pass) {
    cudaEventRecord(t0, s);
    st = graph.launch(s);
    cudaEventRecord(t1, s);
    if (st.ok()) st = kc::wait_event(t1, 120, what);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    if (pass > 0) us.push_back(ms * 1e3 / reps);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", what.c_str(), st.to_string().c_str());
    return -1;
  }
  return bench::median(us);
}

bool finite_on_device(const float* p, size_t n) {
  std::vector<float> h(n);
  if (cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  for (float v : h) if (!std::isfinite(v)) return false;
  return true;
}

// A device buffer of n floats filled with a smooth pattern in [-1, 1] (and its 16-bit copy).
struct Buf {
  kc::DeviceBuffer<float> f;
  kc::DeviceBuffer<uint16_t> h;
  bool make(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    if (!f.allocate(n, "bench data").ok() || !h.allocate(n, "bench data").ok()) return false;
    cudaMemcpy(f.get(), v.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    return kc::f32_to_bf16(f.get(), h.get(), n).ok();
  }
};

void row(const char* name, const std::string& shape, double us, double work, const char* unit, double ceiling,
         bool ok) {
  const double rate = us > 0 ? work / (us * 1e-6) : 0;
  const double scale = unit[0] == 'T' ? 1e12 : 1e9;  // TFLOP/s or GB/s
  std::printf("%-26s %-22s %10.2f %12.1f %-7s %7.1f%% %5s\n", name, shape.c_str(), us, rate / scale, unit,
              ceiling > 0 ? 100.0 * rate / ceiling : 0.0, ok && us > 0 ? "ok" : "WRONG");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the training step's kernels against this GPU's measured ceilings"};
  std::vector<int> batches{128, 1024};
  int reps = 200;
  app.add_option("--batches", batches, "batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--reps", reps, "calls per timed graph")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::string why;
  if (cuda_device_count(&why) == 0) {
    std::fprintf(stderr, "SKIPPED: bench_gpu_kernels: no CUDA device visible (%s)\n", why.c_str());
    return 77;
  }
  if (!kc::select_device(0).ok()) return 1;
  kc::Stream stream;
  kc::CublasHandle blas;
  if (!stream.create().ok() || !blas.create(stream.get()).ok()) return 1;
  cudaStream_t s = stream.get();
  bool all_ok = true;
  std::printf("# %s\n# device: cuda:0 (%s); times per call replayed from CUDA graphs (median of 3)\n",
              bench::command_line(argc, argv).c_str(), kc::device_name(0).c_str());
  std::printf("%-26s %-22s %10s %12s %-7s %8s %5s\n", "kernel", "shape", "us", "rate", "unit", "of peak", "check");

  // ---- ceilings ----
  const int big = 8192;
  Buf a, b, c;
  if (!a.make(size_t(big) * big) || !b.make(size_t(big) * big) || !c.make(size_t(big) * big)) return 1;
  const double gemm_flops = 2.0 * big * big * big;
  const double f32_us = time_us(s, 3, [&] { return kc::matmul(blas, false, false, big, big, big, 1.0f, a.f.get(),
                                                              b.f.get(), 0.0f, c.f.get()); }, "sgemm 8192");
  const double f32_peak = f32_us > 0 ? gemm_flops / (f32_us * 1e-6) : 0;
  row("peak: sgemm (strict f32)", "8192^3", f32_us, gemm_flops, "TFLOP/s", f32_peak, finite_on_device(c.f.get(), 1024));
  const double bf_us = time_us(s, 3, [&] { return kc::matmul_low(blas, DType::bf16, false, false, big, big, big, 1.0f,
                                                                 a.h.get(), b.h.get(), 0.0f, c.f.get()); },
                               "bf16 gemm 8192");
  const double bf_peak = bf_us > 0 ? gemm_flops / (bf_us * 1e-6) : 0;
  row("peak: bf16 gemm", "8192^3", bf_us, gemm_flops, "TFLOP/s", bf_peak, finite_on_device(c.f.get(), 1024));
  const size_t copy_n = size_t(big) * big;  // 256 MiB
  const double copy_us = time_us(s, 3, [&]() -> Status {
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(c.f.get(), a.f.get(), copy_n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    return {};
  }, "copy");
  const double bandwidth = copy_us > 0 ? 2.0 * copy_n * sizeof(float) / (copy_us * 1e-6) : 0;
  row("peak: device copy", "256 MiB", copy_us, 2.0 * copy_n * sizeof(float), "GB/s", bandwidth, true);
  all_ok = all_ok && f32_peak > 0 && bf_peak > 0 && bandwidth > 0;

  for (int batch : batches) {
    // ---- the MLP 784-256-128-10: every product of a step, f32 and bf16 ----
    const int dims[] = {784, 256, 128, 10};
    for (int l = 0; l < 3; ++l) {
      const int in = dims[l], out = dims[l + 1];
      struct G { const char* name; bool ta, tb; int m, n, k; };
      const G gs[] = {{"mlp fwd", false, false, batch, out, in}, {"mlp dW", true, false, in, out, batch},
                      {"mlp dX", false, true, batch, in, out}};
      for (const G& g : gs) {
        if (l == 0 && g.tb) continue;  // the first layer's input gradient is never computed
        const std::string shape = std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
        const double flops = 2.0 * g.m * g.n * g.k;
        double us = time_us(s, reps, [&] { return kc::matmul(blas, g.ta, g.tb, g.m, g.n, g.k, 1.0f, a.f.get(),
                                                             b.f.get(), 0.0f, c.f.get()); }, g.name);
        row((std::string(g.name) + " f32").c_str(), shape, us, flops, "TFLOP/s", f32_peak, us > 0);
        us = time_us(s, reps, [&] { return kc::matmul_low(blas, DType::bf16, g.ta, g.tb, g.m, g.n, g.k, 1.0f,
                                                          a.h.get(), b.h.get(), 0.0f, c.f.get()); }, g.name);
        row((std::string(g.name) + " bf16").c_str(), shape, us, flops, "TFLOP/s", bf_peak, us > 0);
        all_ok = all_ok && us > 0;
      }
    }
#ifdef TROUPE_WITH_CUDNN
    // ---- the cnn (28x28, conv3x3 32-64, dense 256-10): its convolutions and memory-bound kernels ----
    auto layout = CnnLayout::make(28, 28, 1, ImageOrder::chw, 10, {32, 64}, 3, {256});
    if (!layout.ok()) return 1;
    kc::CudnnHandle cudnn;
    if (!cudnn.create(s).ok()) {
      std::fprintf(stderr, "cuDNN could not be loaded: the cnn rows are missing\n");
      return 1;
    }
    for (int blk = 0; blk < layout->conv_blocks(); ++blk) {
      const kernels::cpu::Conv2dShape cs = layout->conv(blk, batch);
      kc::ConvPlan plan;
      Status st = plan.create(cudnn, cs, false, size_t(256) << 20);
      kc::DeviceBuffer<char> ws;
      if (!st.ok() || !ws.allocate(std::max<size_t>(plan.workspace_bytes(), 1), "workspace").ok()) {
        std::fprintf(stderr, "conv block %d: %s\n", blk, st.to_string().c_str());
        return 1;
      }
      const double flops = 2.0 * cs.batch * cs.out_channels * cs.pixels() * double(cs.patch());
      const std::string shape = std::to_string(cs.in_channels) + "->" + std::to_string(cs.out_channels) + " " +
                                std::to_string(cs.height) + "x" + std::to_string(cs.width) + " b" + std::to_string(batch);
      // a: input and weights, c: output / output gradient, b: input gradient / weight gradient
      double us = time_us(s, reps, [&] { return plan.forward(cudnn, a.f.get(), b.f.get(), c.f.get(), ws.get(),
                                                             ws.bytes()); }, "conv forward");
      row(("cnn conv" + std::to_string(blk) + " fwd").c_str(), shape, us, flops, "TFLOP/s", f32_peak,
          finite_on_device(c.f.get(), 1024));
      us = time_us(s, reps, [&] { return plan.backward_filter(cudnn, a.f.get(), c.f.get(), b.f.get(), ws.get(),
                                                              ws.bytes()); }, "conv backward-filter");
      row(("cnn conv" + std::to_string(blk) + " dW").c_str(), shape, us, flops, "TFLOP/s", f32_peak,
          finite_on_device(b.f.get(), 256));
      // What the cnn runs in strict f32: the filter gradient as cuBLAS products over groups of images
      // (conv_filter_grad.h), at the default split (the row without a count) and at other splits.
      const int chosen = kc::conv_filter_grad_parts(cs);
      for (int parts : {0, 1, 8, 32, 128, cs.batch}) {
        if (parts > 0 && (parts == chosen || cs.batch % parts != 0 || (parts == 128 && cs.batch == 128))) continue;
        kc::DeviceBuffer<char> gemm_ws;
        if (!gemm_ws.allocate(kc::conv_filter_grad_workspace_bytes(cs, parts), "workspace").ok()) return 1;
        us = time_us(s, reps, [&] { return kc::conv_filter_grad(blas, cs, a.f.get(), c.f.get(), b.f.get(),
                                                                gemm_ws.get(), gemm_ws.bytes(), parts); },
                     "conv_filter_grad");
        const std::string split = " /" + std::to_string(parts == 0 ? chosen : parts);
        const std::string label =
            "cnn conv" + std::to_string(blk) + " dW gemm" + split + (parts == 0 ? " (default)" : "");
        row(label.c_str(), shape, us, flops, "TFLOP/s", f32_peak, finite_on_device(b.f.get(), 256));
      }
      if (blk > 0) {
        us = time_us(s, reps, [&] { return plan.backward_data(cudnn, a.f.get(), c.f.get(), b.f.get(), ws.get(),
                                                              ws.bytes()); }, "conv backward-data");
        row(("cnn conv" + std::to_string(blk) + " dX").c_str(), shape, us, flops, "TFLOP/s", f32_peak,
            finite_on_device(b.f.get(), 1024));
      }
      std::printf("#   conv%d algorithms: %s\n", blk, plan.describe().c_str());
      // Fused bias + ReLU + pool: reads the conv output, writes the pooled output and arg-max.
      const kernels::cpu::PoolShape ps = layout->pool(blk, batch);
      const double in_bytes = 4.0 * ps.planes * ps.height * ps.width;
      const double out_elems = double(ps.planes) * ps.out_height() * ps.out_width();
      kc::DeviceBuffer<int32_t> arg;
      if (!arg.allocate(size_t(out_elems), "arg-max").ok()) return 1;
      us = time_us(s, reps, [&] { return kc::bias_relu_max_pool(c.f.get(), b.f.get(), cs.out_channels, ps, a.f.get(),
                                                                arg.get(), s); }, "bias_relu_max_pool");
      row(("cnn pool" + std::to_string(blk) + " fwd").c_str(), shape, us, in_bytes + 8.0 * out_elems, "GB/s",
          bandwidth, finite_on_device(a.f.get(), 256));
      us = time_us(s, reps, [&] { return kc::max_pool_relu_backward(b.f.get(), a.f.get(), arg.get(), ps, c.f.get(), s); },
                   "max_pool_relu_backward");
      row(("cnn pool" + std::to_string(blk) + " bwd").c_str(), shape, us, in_bytes + 12.0 * out_elems, "GB/s",
          bandwidth, finite_on_device(c.f.get(), 256));
    }
#endif
  }
  // ---- the optimizer: Adam over the cnn's 824,458 parameters (params, grads, m, v read; 3 written) ----
  const size_t n = 824458;
  kc::DeviceBuffer<float> m, v;
  if (!m.allocate(n, "m").ok() || !v.allocate(n, "v").ok()) return 1;
  cudaMemset(m.get(), 0, m.bytes());
  cudaMemset(v.get(), 0, v.bytes());
  kc::AdamParams hp;
  hp.lr = 1e-6f;
  const double us = time_us(s, reps, [&] { return kc::adam_step(a.f.get(), b.f.get(), m.get(), v.get(), n, {}, hp, s); },
                            "adam_step");
  row("adam step", "824458 params", us, 7.0 * 4 * n, "GB/s", bandwidth, finite_on_device(a.f.get(), 1024));
  return all_ok ? 0 : 1;
}

#endif  // TROUPE_WITH_CUDA
