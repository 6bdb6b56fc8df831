// bench_train_gpu: how fast the GPU trainer trains the MLP (or the cnn), and what cuBLAS does at
// the MLP's shapes.
//
//   bench_train_gpu [--data-dir DIR] [--model mlp|cnn] [--epochs 3] [--runs 5] [--batch 128] [--tf32]
//                   [--precision f32|bf16|f16]   (bf16 / f16: the mlp; f16 with the loss scaled on the device)
//
// Two tables, nccl-tests style (every result checked):
//   1. train_mlp_cuda (train_cnn_cuda) samples/s for each optimizer, with and without CUDA graphs:
//      one warm-up run, then the median of --runs runs of --epochs epochs (training time only; the
//      trained model's test accuracy is checked to beat chance by far);
//   2. (mlp) cuBLAS sgemm time (eager and replayed from a CUDA graph) and GFLOP/s for the 8 matrix products of one training step (forward,
//      weight gradients, input gradients), each result checked against the CPU's OpenBLAS.
// The last line, "troupe_samples_per_s: N", is the default configuration's median (for scripts,
// e.g. bench/pytorch_mlp.py --troupe N prints the ratio).
#include <cstdio>
#include <cstdlib>

#ifndef TROUPE_WITH_CUDA
int main() {
  std::fprintf(stderr, "bench_train_gpu: troupe was built without CUDA; nothing to measure\n");
  return 77;
}
#else

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/device.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/runtime.h"
#include "models/mlp/mlp_gpu.h"
#include "models/cnn/cnn_gpu.h"
#include "trainers/cuda/cuda_trainer.h"
#include "data/readers/fashion_mnist.h"

namespace {

using namespace troupe;  // NOLINT: a benchmark driver
namespace kc = kernels::cuda;

// Record 1: trainer throughput for one configuration. Returns the median samples/s, or -1 on error.
double bench_trainer(const TrainOptions& base, const MlpLayout& layout, const Dataset& train, const Dataset& test,
                     int runs) {
  const bool cnn = base.model == "cnn";
  std::vector<double> sps;
  double accuracy = 0;
  for (int r = 0; r <= runs; ++r) {  // run 0 warms up (module loading, cuBLAS heuristics)
    TrainOptions o = base;
    if (r == 0) o.epochs = 1;
    auto res = cnn ? train_cnn_cuda(o, train, test) : train_mlp_cuda(o, layout, train, test);
    if (!res.ok()) {
      std::fprintf(stderr, "training %s failed: %s\n", base.model.c_str(), res.status().to_string().c_str());
      return -1;
    }
    if (r > 0) sps.push_back(res->samples_per_second);
    accuracy = res->test_accuracy;
  }
  const double med = bench::median(sps);
  const bool ok = accuracy > 0.8;  // 3 epochs reach ~0.87; chance is 0.10
  std::printf("%-8s %-7s %6d %8d %14.0f %14.0f %14.0f %9.4f %5s\n", base.optimizer.c_str(),
              base.cuda_graphs ? "on" : "off", base.batch_size, base.epochs, med,
              *std::min_element(sps.begin(), sps.end()), *std::max_element(sps.begin(), sps.end()), accuracy,
              ok ? "ok" : "WRONG");
  return ok ? med : -1;
}

// Record 2: one sgemm shape, timed with events over many repetitions and checked against OpenBLAS.
bool bench_gemm(const kc::CublasHandle& blas, const char* name, bool ta, bool tb, int m, int n, int k) {
  std::vector<float> a(size_t(m) * k), b(size_t(k) * n), c(size_t(m) * n, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37 * i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11 * i);
  kc::DeviceBuffer<float> da, db, dc;
  if (!da.allocate(a.size(), "a").ok() || !db.allocate(b.size(), "b").ok() || !dc.allocate(c.size(), "c").ok()) {
    return false;
  }
  cudaMemcpy(da.get(), a.data(), da.bytes(), cudaMemcpyHostToDevice);
  cudaMemcpy(db.get(), b.data(), db.bytes(), cudaMemcpyHostToDevice);
  // Two timings: eager calls back to back (what a loop without graphs pays: cuBLAS's host work per
  // call) and the same calls replayed from one CUDA graph (the GPU's time per product).
  constexpr int kReps = 1000;
  auto enqueue = [&](cudaStream_t) -> Status {
    for (int i = 0; i < kReps; ++i) {
      TROUPE_RETURN_IF_ERROR(kc::matmul(blas, ta, tb, m, n, k, 1.0f, da.get(), db.get(), 0.0f, dc.get()));
    }
    return {};
  };
  kc::GraphExec graph;
  Status st = graph.capture(blas.stream(), enqueue);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  float eager_ms = 0, graph_ms = 0;
  for (int pass = 0; pass < 2 && st.ok(); ++pass) {  // pass 0 warms up
    cudaEventRecord(t0, blas.stream());
    st = enqueue(blas.stream());
    cudaEventRecord(t1, blas.stream());
    if (st.ok()) st = kc::wait_event(t1, 60, "the eager sgemm benchmark");
    cudaEventElapsedTime(&eager_ms, t0, t1);
    cudaEventRecord(t0, blas.stream());
    if (st.ok()) st = graph.launch(blas.stream());
    cudaEventRecord(t1, blas.stream());
    if (st.ok()) st = kc::wait_event(t1, 60, "the graphed sgemm benchmark");
    cudaEventElapsedTime(&graph_ms, t0, t1);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  if (!st.ok()) std::fprintf(stderr, "%s: %s\n", name, st.to_string().c_str());
  std::vector<float> got(c.size());
  cudaMemcpy(got.data(), dc.get(), dc.bytes(), cudaMemcpyDeviceToHost);
  kernels::cpu::matmul(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
  double max_err = 0;
  for (size_t i = 0; i < c.size(); ++i) max_err = std::max(max_err, double(std::fabs(got[i] - c[i])));
  const bool ok = st.ok() && max_err <= 1e-4 * k;  // |values| <= 1: k * eps-sized sums, far below 1e-4 * k
  const double eager_us = eager_ms * 1e3 / kReps, graph_us = graph_ms * 1e3 / kReps;
  std::printf("%-14s %c%c %5d %5d %5d %10.2f %10.2f %12.1f %5s\n", name, ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
              eager_us, graph_us, 2.0 * m * n * k / (graph_us * 1e3), ok ? "ok" : "WRONG");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GPU trainer and cuBLAS benchmark"};
  std::string dir = std::getenv("TROUPE_DATASET_DIR") ? std::getenv("TROUPE_DATASET_DIR") : TROUPE_DEFAULT_DATASET_DIR;
  int epochs = 3, runs = 5, batch = 128;
  std::string model = "mlp";
  bool tf32 = false;
  std::string precision = "f32";
  app.add_option("--data-dir", dir, "Fashion-MNIST folder")->capture_default_str();
  app.add_option("--epochs", epochs, "epochs per timed run")->capture_default_str();
  app.add_option("--runs", runs, "timed runs (median reported)")->capture_default_str();
  app.add_option("--batch", batch, "batch size")->capture_default_str();
  app.add_option("--model", model, "mlp or cnn (channels 32,64, kernel 3, dense 256)")
      ->check(CLI::IsMember({"mlp", "cnn"}))
      ->capture_default_str();
  app.add_flag("--tf32", tf32, "cnn: let cuDNN use TF32 tensor cores (PyTorch's default for convolutions)");
  app.add_option("--precision", precision, "mlp: f32, or bf16 / f16 mixed precision (f32 master weights)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the trainers' per-epoch lines would bury the table

  std::string why;
  if (cuda_device_count(&why) == 0) {
    std::fprintf(stderr, "SKIPPED: bench_train_gpu: no CUDA device visible (%s)\n", why.c_str());
    return 77;
  }
  auto train = load_fashion_mnist(dir, Split::train);
  auto test = load_fashion_mnist(dir, Split::test);
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "bench_train_gpu: %s\n",
                 (train.ok() ? test.status() : train.status()).to_string().c_str());
    return 1;
  }
  TrainOptions base;
  base.device = Device::cuda(0);
  base.epochs = epochs;
  base.batch_size = batch;
  base.evaluate_each_epoch = false;
  base.model = model;
  base.tf32 = tf32;
  parse_dtype(precision, &base.precision);  // checked by CLI11
  if (model == "cnn" && base.precision != DType::f32) {
    std::fprintf(stderr, "bench_train_gpu: the cnn trains in f32 on GPUs (--precision %s is the mlp's)\n",
                 precision.c_str());
    return 2;
  }
  if (model == "cnn") base.trainer_args = {"channels=32,64", "kernel=3", "hidden=256"};
  std::vector<int> dims{784};
  dims.insert(dims.end(), base.hidden.begin(), base.hidden.end());
  dims.push_back(10);
  auto layout = MlpLayout::make(dims);
  if (!layout.ok()) return 1;
  std::printf("# %s\n", bench::command_line(argc, argv).c_str());
  const std::string model_name = model == "cnn" ? std::string("cnn 28x28 conv3x3 32-64 dense 256-10") +
                                                      (tf32 ? " (tf32)" : " (strict f32)")
                                                : "mlp " + layout->to_string() + " (" + precision + ")";
  std::printf("# device: cuda:0 (%s)\n# model: %s, batch %d, %d epochs per run, median of %d runs\n",
              kc::device_name(0).c_str(), model_name.c_str(), batch, epochs, runs);
  std::printf("%-8s %-7s %6s %8s %14s %14s %14s %9s %5s\n", "optim", "graphs", "batch", "epochs", "samples/s",
              "min", "max", "test_acc", "check");
  bool all_ok = true;
  double headline = 0;
  for (const char* opt : {"adam", "sgd"}) {
    for (bool graphs : {true, false}) {
      TrainOptions o = base;
      o.optimizer = opt;
      o.cuda_graphs = graphs;
      const double sps = bench_trainer(o, *layout, *train, *test, runs);
      all_ok = all_ok && sps > 0;
      if (o.optimizer == base.optimizer && graphs) headline = sps;
    }
  }

  if (model == "cnn") {
    std::printf("\ntroupe_samples_per_s: %.0f\n", headline);
    return all_ok ? 0 : 1;
  }
  std::printf("\n# cuBLAS sgemm at the MLP's shapes (one training step, batch %d)\n", batch);
  std::printf("%-14s %2s %5s %5s %5s %10s %10s %12s %5s\n", "gemm", "op", "m", "n", "k", "eager_us", "graph_us",
              "GFLOP/s(gr)", "check");
  kc::Stream stream;
  kc::CublasHandle blas;
  if (!stream.create().ok() || !blas.create(stream.get()).ok()) return 1;
  for (int l = 0; l < layout->layers(); ++l) {
    const int in = layout->in(l), out = layout->out(l);
    const std::string tag = std::to_string(in) + "x" + std::to_string(out);
    all_ok &= bench_gemm(blas, ("fwd " + tag).c_str(), false, false, batch, out, in);
    all_ok &= bench_gemm(blas, ("dW " + tag).c_str(), true, false, in, out, batch);
    if (l > 0) all_ok &= bench_gemm(blas, ("dX " + tag).c_str(), false, true, batch, in, out);
  }
  std::printf("\ntroupe_samples_per_s: %.0f\n", headline);
  return all_ok ? 0 : 1;
}

#endif  // TROUPE_WITH_CUDA
