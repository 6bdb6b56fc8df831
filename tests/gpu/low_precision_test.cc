// Mixed precision on the GPU (`--precision bf16`) against the CPU path that defines it: the rounding
// kernels bit for bit with kernels::cpu::round_to, the 16-bit matrix product against the CPU's
// product of rounded operands, one MLP step against MlpCpu with set_precision, and training (the
// CPU's trajectory on synthetic data; Fashion-MNIST accuracy).
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/dtype.h"
#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/low_ops.h"
#include "kernels/cuda/ops.h"
#include "models/mlp/mlp_gpu.h"
#include "trainers/cuda/cuda_trainer.h"
#include "models/mlp/mlp_cuda.h"
#include "trainers/local/local_trainer.h"
#include "models/mlp/mlp.h"

namespace troupe {
namespace {

using test::DeviceArray;
using test::synthetic;
namespace kc = kernels::cuda;
namespace cpu = kernels::cpu;

std::vector<float> rounded(DType t, std::vector<float> v) {
  cpu::round_to(t, v.data(), v.data(), v.size());
  return v;
}
std::vector<uint16_t> bits_of(DType t, const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = t == DType::bf16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
  return b;
}

TEST_CASE("cuda round_to, scale_round and bias_act_round round as cpu::round_to, bit for bit", "[gpu][low]") {
  for (DType t : {DType::bf16, DType::f16}) {
    for (size_t n : test::test_sizes()) {
      CAPTURE(dtype_name(t), n);
      // Values spanning f16's range and beyond (overflow to inf), and ties.
      auto x = test::random_floats(n, n + 5, -70000.0f, 70000.0f);
      DeviceArray<float> dx(x), dy(n);
      DeviceArray<uint16_t> low(n);
      REQUIRE(kc::round_to(t, dx.get(), dy.get(), n, low.get()).ok());
      CHECK_SAME(dy.host(), rounded(t, x));
      CHECK_SAME(low.host(), bits_of(t, rounded(t, x)));
      std::vector<float> scaled = x;
      for (float& v : scaled) v *= 0.375f;
      REQUIRE(kc::scale_round(t, dx.get(), n, 0.375f, nullptr).ok());
      CHECK_SAME(dx.host(), rounded(t, scaled));
    }
    for (auto [rows, cols] : {std::pair{0, 3}, {1, 1}, {7, 13}, {128, 256}, {257, 10}}) {
      for (bool relu : {false, true}) {
        CAPTURE(dtype_name(t), rows, cols, relu);
        auto x = test::random_floats(size_t(rows) * cols, rows + cols);
        auto b = test::random_floats(size_t(cols), cols);
        std::vector<float> ref = x;
        cpu::bias_act(ref.data(), b.data(), rows, cols, relu);
        ref = rounded(t, ref);
        DeviceArray<float> dx(x), db(b);
        DeviceArray<uint16_t> low(size_t(rows) * cols);
        REQUIRE(kc::bias_act_round(t, dx.get(), db.get(), rows, cols, relu, low.get()).ok());
        CHECK_SAME(dx.host(), ref);
        CHECK_SAME(low.host(), bits_of(t, ref));
      }
    }
  }
  CHECK(kc::scale_round(DType::f32, nullptr, 0, 1.0f, nullptr).code() == Code::invalid_argument);
}

TEST_CASE("cuda relu_backward_round_bias_grad masks, rounds and sums the rounded values", "[gpu][low]") {
  for (DType t : {DType::bf16, DType::f16}) {
    for (auto [rows, cols] : {std::pair{1, 1}, {7, 13}, {128, 256}, {1021, 3}}) {
      CAPTURE(dtype_name(t), rows, cols);
      const size_t n = size_t(rows) * cols;
      auto dy = test::random_floats(n, n + 1), y = test::random_floats(n, n + 2);
      std::vector<float> ref = dy;
      cpu::relu_backward(ref.data(), y.data(), n);
      ref = rounded(t, ref);
      std::vector<double> sums(size_t(cols), 0.0);
      for (size_t i = 0; i < n; ++i) sums[i % cols] += ref[i];
      DeviceArray<float> ddy(dy), dyy(y), db(static_cast<size_t>(cols));
      DeviceArray<uint16_t> low(n);
      REQUIRE(kc::relu_backward_round_bias_grad(t, ddy.get(), dyy.get(), rows, cols, low.get(), db.get()).ok());
      CHECK_SAME(ddy.host(), ref);
      CHECK_SAME(low.host(), bits_of(t, ref));
      auto got = db.host();
      for (int c = 0; c < cols; ++c) CHECK(got[c] == Approx(sums[c]).margin(rows * 4 * test::kF32Eps + 1e-30));
    }
  }
}

TEST_CASE("cuda matmul_low equals the CPU's product of the rounded operands up to summation order",
          "[gpu][low][blas]") {
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CublasHandle blas;
  REQUIRE(blas.create(stream.get()).ok());
  for (DType t : {DType::bf16, DType::f16}) {
    for (auto [ta, tb] : {std::pair{false, false}, {true, false}, {false, true}}) {
      const int m = 128, n = 256, k = 784;
      CAPTURE(dtype_name(t), ta, tb);
      auto a = rounded(t, test::random_floats(size_t(m) * k, 1)), b = rounded(t, test::random_floats(size_t(k) * n, 2));
      std::vector<float> ref(size_t(m) * n);
      cpu::matmul(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, ref.data());
      DeviceArray<uint16_t> da(bits_of(t, a)), db(bits_of(t, b));
      DeviceArray<float> dc(size_t(m) * n);
      REQUIRE(kc::matmul_low(blas, t, ta, tb, m, n, k, 1.0f, da.get(), db.get(), 0.0f, dc.get()).ok());
      auto got = dc.host();
      size_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - ref[i]) <= k * 4 * test::kF32Eps);
      CHECK(bad == 0);
    }
  }
  CHECK(kc::matmul_low(blas, DType::f32, false, false, 1, 1, 1, 1.0f, nullptr, nullptr, 0.0f, nullptr).code() ==
        Code::invalid_argument);
}

TEST_CASE("GPU mlp in bf16: one step's loss and gradients match MlpCpu in bf16", "[gpu][low][trainer]") {
  const Dataset data = synthetic(64, 8, 5, 31);
  auto layout = MlpLayout::make({64, 32, 16, 5});
  REQUIRE(layout.ok());
  const size_t n = layout->param_count;
  std::vector<float> params(n);
  mlp_init(*layout, 1, params.data());
  MlpCpu ref(*layout);
  ref.set_precision(DType::bf16);
  std::vector<float> cpu_grads(n, 0.0f);
  int64_t cpu_correct = 0;
  const float cpu_loss = ref.forward_backward(params.data(), data.images.data(), data.labels.data(), 64,
                                              cpu_grads.data(), &cpu_correct, {}, 1.0f);
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CublasHandle blas;
  REQUIRE(blas.create(stream.get()).ok());
  MlpCuda model(*layout, blas, DType::bf16);
  REQUIRE(model.reserve(64).ok());
  DeviceArray<float> dp(params), dx(data.images), dg(n), loss(1);
  DeviceArray<int32_t> dl(data.labels);
  DeviceArray<unsigned long long> correct(1);
  REQUIRE(model.forward_backward(dp.get(), dx.get(), dl.get(), 64, dg.get(), loss.get(), correct.get()).ok());
  // Summation order differs, so a value near a bf16 rounding boundary may land one bf16 step
  // (2^-8 relative) away and carry that on: compare to a few such steps of the largest gradient.
  CHECK(loss.host()[0] == Approx(cpu_loss).epsilon(1e-2));
  CHECK(static_cast<int64_t>(correct.host()[0]) == cpu_correct);
  const auto got = dg.host();
  double largest = 0, diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    largest = std::max(largest, double(std::fabs(cpu_grads[i])));
    diff2 += double(got[i] - cpu_grads[i]) * (got[i] - cpu_grads[i]);
    ref2 += double(cpu_grads[i]) * cpu_grads[i];
  }
  size_t far = 0;
  for (size_t i = 0; i < n; ++i) far += !(std::fabs(got[i] - cpu_grads[i]) <= 0.03 * largest);
  CHECK(far == 0);
  CHECK(std::sqrt(diff2 / ref2) < 0.02);
  // Every gradient is a bf16 value, as the CPU rounds them.
  CHECK_SAME(got, rounded(DType::bf16, got));
}

TEST_CASE("GPU trainer in bf16 follows the CPU trainer in bf16 on synthetic data", "[gpu][low][trainer]") {
  const Dataset train = synthetic(2109, 6, 5, 41), test = synthetic(300, 6, 5, 42);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 3;
  o.batch_size = 16;
  o.precision = DType::bf16;
  auto cpu = train_mlp_cpu(o, train, test);
  o.device = Device::cuda(0);
  auto layout = MlpLayout::make({36, 32, 16, 5});
  REQUIRE(layout.ok());
  auto gpu = train_mlp_cuda(o, *layout, train, test);
  INFO(gpu.status().to_string());
  REQUIRE(cpu.ok());
  REQUIRE(gpu.ok());
  CHECK(gpu->precision == "bf16");
  for (size_t e = 0; e < 3; ++e) {
    CHECK(gpu->history[e].train_loss == Approx(cpu->history[e].train_loss).epsilon(0.03));
    CHECK(gpu->history[e].test_accuracy == Approx(cpu->history[e].test_accuracy).margin(0.03));
  }
}

TEST_CASE("GPU trainer in bf16 reaches the f32 accuracy on Fashion-MNIST", "[gpu][low][e2e]") {
  auto fashion = test::fashion_mnist();
  auto& train = fashion.train;
  auto& test = fashion.test;
  TrainOptions o;  // the defaults: MLP 784-256-128-10, 10 epochs, batch 128
  o.device = Device::cuda(0);
  o.precision = DType::bf16;
  auto r = train_cuda(o, *train, *test);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  WARN("Fashion-MNIST mlp in bf16 on " << r->device << ": test accuracy " << r->test_accuracy << " ("
                                       << r->samples_per_second << " samples/s)");
  CHECK(r->test_accuracy >= 0.885);
}

}  // namespace
}  // namespace troupe
