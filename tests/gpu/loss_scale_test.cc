// f16 on the GPU (`--precision f16`): dynamic loss scaling decided on the device
// (kernels/cuda/loss_scale_ops.h) against the CPU that defines it: the rule step by step against
// LossScaler, optimizer steps gated by it against the CPU's skip / unscale / step, the scaled
// loss gradient of one MLP step against MlpCpu's, training against the CPU trainer in f16 (one GPU
// and two sync replicas sharing it), and Fashion-MNIST accuracy.
#include <cmath>
#include <limits>
#include <vector>

#include "gpu_replicas.h"
#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/loss_scale_ops.h"
#include "kernels/cuda/low_ops.h"
#include "kernels/cuda/ops.h"
#include "models/mlp/mlp_gpu.h"
#include "trainers/cuda/cuda_trainer.h"
#include "models/mlp/mlp_cuda.h"
#include "trainers/cuda/cuda_replica.h"
#include "trainers/local/local_trainer.h"
#include "trainers/optim/loss_scale.h"
#include "models/mlp/mlp.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {
namespace {

using test::DeviceArray;
using troupe::testing::relative_difference;
namespace kc = kernels::cuda;
namespace cpu = kernels::cpu;

kc::DeviceLossScale read_back(DeviceArray<kc::DeviceLossScale>& d) { return d.host()[0]; }

TEST_CASE("cuda loss_scale_check takes LossScaler's decisions step by step, and gives up where it does",
          "[gpu][f16]") {
  LossScaleOptions o;
  o.initial = 1024;
  o.interval = 3;
  o.max_skipped_in_a_row = 4;
  LossScaler ref(o);
  DeviceArray<kc::DeviceLossScale> d(1);
  REQUIRE(kc::loss_scale_start(d.get(), o, 5, nullptr).ok());
  CHECK(read_back(d).state.scale == 1024);
  CHECK(read_back(d).applied == 5);
  std::vector<float> good = test::random_floats(1000, 3), bad = good;
  bad[777] = std::numeric_limits<float>::infinity();
  std::vector<float> nan = good;
  nan[0] = std::nanf("");
  DeviceArray<float> g_good(good), g_bad(bad), g_nan(nan);
  // finite x2, overflow, finite x4 (grows), NaN, then overflows until the rule gives up.
  const std::vector<int> pattern{1, 1, 0, 1, 1, 1, 1, 2, 0, 0, 0, 0, 1};
  int64_t applied = 5;
  for (size_t i = 0; i < pattern.size(); ++i) {
    CAPTURE(i);
    kc::DeviceStep at;
    at.offset = static_cast<int64_t>(i) + 1;
    float* g = pattern[i] == 1 ? g_good.get() : pattern[i] == 0 ? g_bad.get() : g_nan.get();
    const float used = ref.scale();
    REQUIRE(kc::loss_scale_check(g, good.size(), d.get(), o, at, nullptr).ok());
    auto want = ref.update(pattern[i] == 1);
    const kc::DeviceLossScale got = read_back(d);
    CHECK(got.used_inverse == 1.0f / used);
    CHECK(got.finite == 1);  // ready for the next check
    if (!want.ok()) {  // the fourth overflow in a row (the NaN the first)
      CHECK(i == 10);
      CHECK(got.outcome == static_cast<int32_t>(LossScaleStep::give_up));
      CHECK(got.failed_step == static_cast<int64_t>(i) + 1);
      CHECK(got.failed_in_a_row == 4);
      CHECK(loss_scale_gave_up(got.failed_in_a_row, got.failed_scale).message() == want.status().message());
      break;
    }
    applied += *want ? 1 : 0;
    CHECK(got.outcome == static_cast<int32_t>(*want ? LossScaleStep::apply : LossScaleStep::skip));
    CHECK(got.state.scale == ref.scale());
    CHECK(got.state.skipped == ref.skipped());
    CHECK(got.applied == applied);
    CHECK(got.failed_step == 0);
  }
  // After giving up every later step stays skipped, even a finite one.
  kc::DeviceStep at;
  at.offset = 99;
  REQUIRE(kc::loss_scale_check(g_good.get(), good.size(), d.get(), o, at, nullptr).ok());
  CHECK(read_back(d).outcome == static_cast<int32_t>(LossScaleStep::give_up));
  CHECK(read_back(d).failed_step == 11);
  CHECK(kc::loss_scale_check(nullptr, 4, d.get(), o, at, nullptr).code() == Code::invalid_argument);
  CHECK(kc::loss_scale_start(d.get(), o, -1, nullptr).code() == Code::invalid_argument);
}

TEST_CASE("cuda sgd/adam steps gated by the loss scale: skipped steps change nothing, applied ones unscale and "
          "count as the CPU's",
          "[gpu][f16][optim]") {
  const size_t n = 4097;
  LossScaleOptions o;
  o.initial = 256;
  o.interval = 2;
  for (bool adam : {false, true}) {
    CAPTURE(adam);
    auto p = test::random_floats(n, 5);
    std::vector<float> s1(n, 0.0f), s2(n, 0.0f);
    DeviceArray<float> dp(p), d1(s1), d2(s2);
    DeviceArray<kc::DeviceLossScale> ls(1);
    REQUIRE(kc::loss_scale_start(ls.get(), o, 0, nullptr).ok());
    LossScaler ref(o);
    int64_t applied = 0;
    cpu::SgdParams sgd;
    sgd.lr = 0.05f;
    sgd.momentum = 0.9f;
    sgd.weight_decay = 1e-3f;
    cpu::AdamParams hp;
    hp.lr = 1e-2f;
    hp.weight_decay = 1e-2f;
    for (int step = 1; step <= 7; ++step) {
      CAPTURE(step);
      auto g = test::random_floats(n, 100 + step);
      for (float& x : g) x *= ref.scale();  // gradients carrying the scale
      if (step == 3 || step == 4) g[step * 100] = std::numeric_limits<float>::infinity();
      DeviceArray<float> dg(g);
      kc::DeviceStep at;
      at.offset = step;
      at.gate = ls.get();
      REQUIRE(kc::loss_scale_check(dg.get(), n, ls.get(), o, at, nullptr).ok());
      if (adam) {
        REQUIRE(kc::adam_step(dp.get(), dg.get(), d1.get(), d2.get(), n, at, hp, nullptr).ok());
      } else {
        REQUIRE(kc::sgd_step(dp.get(), dg.get(), d1.get(), n, sgd, at, nullptr).ok());
      }
      // The CPU trainer's order: decide, divide the scale out, step with the optimizer's own count.
      const float used = ref.scale();
      auto apply = ref.update(step != 3 && step != 4);
      REQUIRE(apply.ok());
      if (!*apply) continue;
      cpu::scale(g.data(), n, 1.0f / used);
      ++applied;
      if (adam) {
        cpu::adam_step(p.data(), g.data(), s1.data(), s2.data(), n, applied, hp);
      } else {
        cpu::sgd_step(p.data(), g.data(), s1.data(), n, sgd);
      }
    }
    CHECK(applied == 5);
    CHECK(read_back(ls).applied == 5);
    // Only FMA contraction inside the update may differ (as in optim_test).
    CHECK(relative_difference(dp.host(), p) < 1e-5);
    CHECK(relative_difference(d1.host(), s1) < 1e-5);
    if (adam) CHECK(relative_difference(d2.host(), s2) < 1e-5);
  }
}

TEST_CASE("cuda scale_round_by reads its scale on the device and rounds as scale_round", "[gpu][f16][low]") {
  const size_t n = 10001;
  auto x = test::random_floats(n, 9);
  DeviceArray<float> a(x), b(x), scale(std::vector<float>{1536.0f});
  DeviceArray<uint16_t> la(n), lb(n);
  REQUIRE(kc::scale_round(DType::f16, a.get(), n, 1536.0f, la.get()).ok());
  REQUIRE(kc::scale_round_by(DType::f16, b.get(), n, scale.get(), lb.get()).ok());
  CHECK_SAME(b.host(), a.host());
  CHECK_SAME(lb.host(), la.host());
  CHECK(kc::scale_round_by(DType::f16, b.get(), n, nullptr, nullptr).code() == Code::invalid_argument);
}

TEST_CASE("GPU mlp in f16 with a device loss scale: one step's gradients match MlpCpu's with that scale",
          "[gpu][f16][trainer]") {
  const Dataset data = test::synthetic(64, 8, 5, 31);
  auto layout = MlpLayout::make({64, 32, 16, 5});
  REQUIRE(layout.ok());
  const size_t n = layout->param_count;
  std::vector<float> params(n);
  mlp_init(*layout, 1, params.data());
  const float s = 4096.0f;
  MlpCpu ref(*layout);
  ref.set_precision(DType::f16);
  std::vector<float> cpu_grads(n, 0.0f);
  int64_t cpu_correct = 0;
  const float cpu_loss = ref.forward_backward(params.data(), data.images.data(), data.labels.data(), 64,
                                              cpu_grads.data(), &cpu_correct, {}, s);
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CublasHandle blas;
  REQUIRE(blas.create(stream.get()).ok());
  MlpCuda model(*layout, blas, DType::f16);
  REQUIRE(model.reserve(64).ok());
  DeviceArray<float> scale(std::vector<float>{s});
  REQUIRE(model.set_loss_scale(scale.get()).ok());
  DeviceArray<float> dp(params), dx(data.images), dg(n), loss(1);
  DeviceArray<int32_t> dl(data.labels);
  DeviceArray<unsigned long long> correct(1);
  REQUIRE(model.forward_backward(dp.get(), dx.get(), dl.get(), 64, dg.get(), loss.get(), correct.get()).ok());
  CHECK(loss.host()[0] == Approx(cpu_loss).epsilon(1e-3));  // the loss is not scaled
  CHECK(static_cast<int64_t>(correct.host()[0]) == cpu_correct);
  // f16 keeps 11 bits: a value at a rounding boundary may land one step (2^-11 relative) away.
  CHECK(relative_difference(dg.host(), cpu_grads) < 5e-3);
  double cpu_norm = 0;
  for (float g : cpu_grads) cpu_norm += double(g) * g;
  CHECK(std::sqrt(cpu_norm) > 1.0);  // the scale is in the gradients (unscaled they are ~1e-2)
  // An f32 model takes no loss scale.
  MlpCuda f32(*layout, blas, DType::f32);
  CHECK(f32.set_loss_scale(scale.get()).code() == Code::invalid_argument);
}

TEST_CASE("GPU trainer in f16 follows the CPU trainer in f16, skipping overflowing steps as it does",
          "[gpu][f16][trainer]") {
  const Dataset train = test::synthetic(2109, 6, 5, 41), test = test::synthetic(300, 6, 5, 42);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 3;
  o.batch_size = 16;
  o.precision = DType::f16;
  o.loss_scale = 16777216.0f;  // 2^24: the first steps overflow and the scale backs off
  auto cpu_run = train_mlp_cpu(o, train, test);
  o.device = Device::cuda(0);
  auto layout = MlpLayout::make({36, 32, 16, 5});
  REQUIRE(layout.ok());
  for (bool graphs : {true, false}) {
    CAPTURE(graphs);
    o.cuda_graphs = graphs;
    auto gpu = train_mlp_cuda(o, *layout, train, test);
    INFO(gpu.status().to_string());
    REQUIRE(cpu_run.ok());
    REQUIRE(gpu.ok());
    CHECK(gpu->precision == "f16");
    CHECK(cpu_run->overflow_steps > 0);
    // Overflow is decided on values that differ by summation order: the same steps up to one near
    // the f16 boundary.
    CHECK(std::llabs(gpu->overflow_steps - cpu_run->overflow_steps) <= 1);
    // The scale after the last step (the last chunk's read-back): the CPU's, when they skipped alike.
    if (gpu->overflow_steps == cpu_run->overflow_steps) CHECK(gpu->loss_scale == cpu_run->loss_scale);
    for (size_t e = 0; e < 3; ++e) {
      CHECK(gpu->history[e].train_loss == Approx(cpu_run->history[e].train_loss).epsilon(0.03));
      CHECK(gpu->history[e].test_accuracy == Approx(cpu_run->history[e].test_accuracy).margin(0.03));
    }
  }
}

TEST_CASE("GPU trainer in f16 follows --loss-scale-interval and stops after --loss-scale-max-skips, as the CPU does",
          "[gpu][f16][trainer]") {
  const Dataset train = test::synthetic(2109, 6, 5, 41), test = test::synthetic(300, 6, 5, 42);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 1;
  o.batch_size = 16;
  o.precision = DType::f16;
  o.max_steps = 12;
  o.loss_scale = 2.0f;
  o.loss_scale_interval = 4;
  auto layout = MlpLayout::make({36, 32, 16, 5});
  REQUIRE(layout.ok());
  for (bool graphs : {true, false}) {
    CAPTURE(graphs);
    TrainOptions g = o;
    g.device = Device::cuda(0);
    g.cuda_graphs = graphs;
    auto grown = train_mlp_cuda(g, *layout, train, test);
    INFO(grown.status().to_string());
    REQUIRE(grown.ok());
    CHECK(grown->overflow_steps == 0);
    CHECK(grown->loss_scale == 16.0f);  // doubled after steps 4, 8 and 12
    g.loss_scale = 16777216.0f;         // overflows at once: stops at the second overflow in a row
    g.loss_scale_max_skips = 2;
    auto gave_up = train_mlp_cuda(g, *layout, train, test);
    REQUIRE_FALSE(gave_up.ok());
    CHECK(gave_up.status().code() == Code::numeric_error);
    CHECK(gave_up.status().message().find("f16 gradients overflowed in 2 steps in a row") != std::string::npos);
  }
}

TEST_CASE("GPU sync replicas in f16 (two sharing a GPU) decide alike and train as the CPU's replicas do",
          "[gpu][f16][replica]") {
  const Dataset train = test::synthetic(2048, 6, 5, 3), test = test::synthetic(300, 6, 5, 4);
  TrainOptions o;
  o.hidden = {32, 16};
  o.epochs = 2;
  o.batch_size = 64;
  o.seed = 7;
  o.optimizer = "adam";
  o.precision = DType::f16;
  o.loss_scale = 16777216.0f;
  const test::ReplicaRun one = test::run_gpu_replicas(1, o, train, test);
  const test::ReplicaRun two = test::run_gpu_replicas(2, o, train, test);
  const test::ReplicaRun cpu = test::run_cpu_replicas(2, o, train, test);
  REQUIRE(one.results[0].ok());
  for (int r = 0; r < 2; ++r) {
    INFO("replica " << r << ": " << two.results[r].status().to_string() << " / cpu "
                    << cpu.results[r].status().to_string());
    REQUIRE(two.results[r].ok());
    REQUIRE(cpu.results[r].ok());
    CHECK(two.results[r]->overflow_steps == two.results[0]->overflow_steps);
    CHECK(two.results[r]->loss_scale == two.results[0]->loss_scale);
  }
  CHECK(one.results[0]->overflow_steps > 0);
  CHECK(two.params[0] == two.params[1]);  // every replica skipped and applied the same steps
  // Two replicas in f16 are not one on the global batch: each rounds its half-batch gradient to f16
  // and a half batch overflows where the whole one may not (measured on an H200: 3.6% apart after
  // 64 steps of Adam, 7 steps skipped against 6). What they must match is the CPU's two replicas,
  // which round and skip alike (measured: 2.7e-6 apart).
  const double vs_one = relative_difference(two.params[0], one.params[0]);
  const double vs_cpu = relative_difference(two.params[0], cpu.params[0]);
  WARN("f16, 2 GPU replicas: overflow steps " << two.results[0]->overflow_steps << " (1 GPU replica "
       << one.results[0]->overflow_steps << ", 2 CPU replicas " << cpu.results[0]->overflow_steps
       << "); parameters " << vs_one << " from 1 GPU replica, " << vs_cpu << " from 2 CPU replicas");
  CHECK(std::llabs(two.results[0]->overflow_steps - cpu.results[0]->overflow_steps) <= 1);
  CHECK(vs_one < 0.1);
  CHECK(vs_cpu < 1e-4);
  CHECK(two.results[0]->test_accuracy == Approx(cpu.results[0]->test_accuracy).margin(0.03));
  CHECK(one.results[0]->test_accuracy == Approx(two.results[0]->test_accuracy).margin(0.03));
}

TEST_CASE("GPU trainer in f16 reaches the f32 accuracy on Fashion-MNIST", "[gpu][f16][e2e]") {
  auto fashion = test::fashion_mnist();
  TrainOptions o;  // the defaults: MLP 784-256-128-10, 10 epochs, batch 128
  o.device = Device::cuda(0);
  o.precision = DType::f16;
  auto r = train_cuda(o, *fashion.train, *fashion.test);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  WARN("Fashion-MNIST mlp in f16 on " << r->device << ": test accuracy " << r->test_accuracy << ", "
                                      << r->overflow_steps << " steps skipped, loss scale " << r->loss_scale
                                      << " at the end (" << r->samples_per_second << " samples/s)");
  CHECK(r->test_accuracy >= 0.885);
}

}  // namespace
}  // namespace troupe
