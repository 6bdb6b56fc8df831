// Mixed precision on the CPU (`--precision bf16|f16`, the reference the CUDA kernels are to match):
// the rounding kernel, the MLP's gradients computed from rounded operands, f16's dynamic loss
// scaling (trainers/optim/loss_scale.h) in the training loop and across sync replicas, and a trainer
// that computes in f32 only refused by name.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include "collectives/inproc_transport.h"
#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "trainers/optim/loss_scale.h"
#include "models/mlp/mlp.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
using troupe::testing::relative_difference;

TEST_CASE("precision: round_to rounds through bf16 and f16 to nearest even and keeps f16's range", "[precision]") {
  const std::vector<float> in{1.0f, 1.00390625f /* 1 + 2^-8: a bf16 tie */, 1.01171875f /* 1 + 3 * 2^-8 */,
                              -3.14159265f, 70000.0f, 65504.0f, 1e-8f, 3e-5f, 0.0f};
  std::vector<float> bf(in.size()), h(in.size()), same(in.size());
  kernels::cpu::round_to(DType::bf16, in.data(), bf.data(), in.size());
  kernels::cpu::round_to(DType::f16, in.data(), h.data(), in.size());
  kernels::cpu::round_to(DType::f32, in.data(), same.data(), in.size());
  CHECK(same == in);
  CHECK(bf[0] == 1.0f);
  CHECK(bf[1] == 1.0f);             // the tie goes to the even mantissa
  CHECK(bf[2] == 1.015625f);        // 1 + 4 * 2^-8: the tie rounds up to even
  CHECK(bf[3] == -3.140625f);       // 8 significant bits
  CHECK(bf[4] == 70144.0f);         // bf16 has f32's range
  CHECK(std::isinf(h[4]));          // past f16's largest finite value
  CHECK(h[5] == 65504.0f);
  CHECK(h[6] == 0.0f);              // below half of f16's smallest subnormal (2^-24)
  CHECK(h[7] == Approx(3e-5f).epsilon(0.02));  // an f16 subnormal: about 2 significant digits left
  for (size_t i = 0; i < in.size(); ++i) {
    CHECK(bf[i] == bf16_to_f32(f32_to_bf16(in[i])));
    if (!std::isinf(h[i])) CHECK(h[i] == f16_to_f32(f32_to_f16(in[i])));
  }
  std::vector<float> in_place = in;  // dst may be src
  kernels::cpu::round_to(DType::bf16, in_place.data(), in_place.data(), in_place.size());
  CHECK(in_place == bf);
}

namespace {

struct Grads {
  std::vector<float> g;
  float loss = 0;
};

Grads mlp_grads(DType precision, float loss_scale, const Dataset& d, const std::vector<float>& params) {
  auto layout = MlpLayout::make({static_cast<int>(d.features()), 32, d.classes});
  REQUIRE(layout.ok());
  MlpCpu model(*layout);
  model.set_precision(precision);
  Grads out;
  out.g.resize(layout->param_count);
  int64_t correct = 0;
  out.loss = model.forward_backward(params.data(), d.images.data(), d.labels.data(), static_cast<int>(d.count),
                                    out.g.data(), &correct, {}, loss_scale);
  return out;
}

}  // namespace

TEST_CASE("precision: the MLP's bf16 and f16 gradients are the f32 ones to their rounding, f16 scaled by the loss "
          "scale",
          "[precision]") {
  const Dataset d = blobs(64, 3, 6, 5);
  auto layout = MlpLayout::make({static_cast<int>(d.features()), 32, d.classes});
  REQUIRE(layout.ok());
  std::vector<float> params(layout->param_count);
  mlp_init(*layout, 3, params.data());

  const Grads f32 = mlp_grads(DType::f32, 1.0f, d, params);
  const Grads bf = mlp_grads(DType::bf16, 1.0f, d, params);
  const Grads h = mlp_grads(DType::f16, 1.0f, d, params);
  // Rounded operands: not the f32 result, but within bf16's (8 bits) and f16's (11 bits) precision.
  CHECK(relative_difference(bf.g, f32.g) > 0);
  CHECK(relative_difference(bf.g, f32.g) < 0.03);
  CHECK(relative_difference(h.g, f32.g) < 0.01);
  CHECK(bf.loss == Approx(f32.loss).epsilon(0.02));

  // f16 with a loss scale: the gradients come back scaled (the runtime divides it out) ...
  const float s = 1024.0f;
  Grads scaled = mlp_grads(DType::f16, s, d, params);
  CHECK(scaled.loss == h.loss);  // the loss itself is never scaled
  kernels::cpu::scale(scaled.g.data(), scaled.g.size(), 1.0f / s);
  CHECK(relative_difference(scaled.g, f32.g) < 0.01);
  // ... and a scale too large overflows f16, which is what the loss scaler watches for.
  const Grads overflow = mlp_grads(DType::f16, 1048576.0f, d, params);
  CHECK_FALSE(kernels::cpu::all_finite(overflow.g.data(), overflow.g.size()));
}

TEST_CASE("precision: the cnn's bf16 and f16 gradients are the f32 ones to their rounding", "[precision][cnn]") {
  const Dataset d = blobs(32, 3, 8, 5);  // 8 x 8 images
  TrainOptions o;
  o.model = "cnn";
  o.trainer_args = {"channels=4,8", "hidden=16"};
  auto grads_in = [&](DType p, float scale) {
    o.precision = p;
    auto setup = set_up_trainer(o, DataSpec{d.features(), d.classes}, 0, 1);
    REQUIRE(setup.ok());
    std::vector<float> params(setup->space.size()), grads(setup->space.size());
    init_parameters(setup->space, 3, params.data());
    Batch b{d.images.data(), d.labels.data(), d.count, d.features(), scale};
    Gradients g(grads.data(), grads.size());
    auto stats = setup->trainer->forward_backward(b, Parameters(params.data(), params.size()), g);
    REQUIRE(stats.ok());
    if (scale != 1.0f) kernels::cpu::scale(grads.data(), grads.size(), 1.0f / scale);
    return grads;
  };
  const std::vector<float> f32 = grads_in(DType::f32, 1.0f);
  const std::vector<float> bf = grads_in(DType::bf16, 1.0f);
  const std::vector<float> h = grads_in(DType::f16, 256.0f);
  CHECK(relative_difference(bf, f32) > 0);
  CHECK(relative_difference(bf, f32) < 0.03);
  CHECK(relative_difference(h, f32) < 0.01);
}

TEST_CASE("precision: the loss scaler skips overflowing steps, backs off, grows after a run of good steps, and "
          "gives up naming the cause",
          "[precision]") {
  LossScaleOptions o;
  o.initial = 1024;
  o.interval = 3;
  o.max_skipped_in_a_row = 4;
  LossScaler s(o);
  CHECK(s.scale() == 1024);
  CHECK(*s.update(false) == false);  // skipped, halved
  CHECK(s.scale() == 512);
  CHECK(s.skipped() == 1);
  CHECK(*s.update(true));
  CHECK(*s.update(true));
  CHECK(s.scale() == 512);
  CHECK(*s.update(true));  // the third good step in a row: grows
  CHECK(s.scale() == 1024);
  CHECK(*s.update(true));
  CHECK(*s.update(false) == false);  // an overflow resets the run of good steps
  CHECK(*s.update(true));
  CHECK(*s.update(true));
  CHECK(s.scale() == 512);

  LossScaleOptions floor = o;
  floor.initial = 2;
  LossScaler low(floor);
  CHECK(*low.update(false) == false);
  CHECK(*low.update(false) == false);
  CHECK(low.scale() == 1);  // not below min
  CHECK(*low.update(false) == false);
  auto gave_up = low.update(false);  // the fourth in a row
  REQUIRE_FALSE(gave_up.ok());
  CHECK(gave_up.status().code() == Code::numeric_error);
  CHECK(gave_up.status().message().find("--precision bf16") != std::string::npos);
}

namespace {

// The f16 runs on blobs below: a small MLP, `epochs` of batches of 64.
TrainOptions f16_blobs(int epochs) {
  TrainOptions o;
  o.hidden = {32};
  o.epochs = epochs;
  o.batch_size = 64;
  o.seed = 5;
  o.precision = DType::f16;
  return o;
}

}  // namespace

TEST_CASE("precision: --loss-scale-interval and --loss-scale-max-skips set a training run's loss scaling",
          "[precision]") {
  const Dataset train = blobs(1200, 3, 6, 7), test = blobs(300, 3, 6, 8);
  TrainOptions o = f16_blobs(1);
  o.max_steps = 12;
  o.loss_scale = 2.0f;  // small: no step overflows
  auto slow = train_with_trainer(o, train, test);
  REQUIRE(slow.ok());
  CHECK(slow->overflow_steps == 0);
  CHECK(slow->loss_scale == 2.0f);  // 12 good steps are not the default 2000
  o.loss_scale_interval = 4;
  auto fast = train_with_trainer(o, train, test);
  REQUIRE(fast.ok());
  CHECK(fast->overflow_steps == 0);
  CHECK(fast->loss_scale == 16.0f);  // doubled after steps 4, 8 and 12

  // 2^24 overflows f16 at once: with 2 overflows in a row allowed, the run stops at the second.
  o.loss_scale = 16777216.0f;
  o.loss_scale_max_skips = 2;
  auto gave_up = train_with_trainer(o, train, test);
  REQUIRE_FALSE(gave_up.ok());
  CHECK(gave_up.status().code() == Code::numeric_error);
  CHECK_THAT(gave_up.status().message(), Catch::Contains("f16 gradients overflowed in 2 steps in a row"));

  o.loss_scale_max_skips = 0;
  CHECK_THAT(o.validate().message(), Catch::Contains("--loss-scale-max-skips must be >= 1"));
  o.loss_scale_max_skips = 100;
  o.loss_scale_interval = 0;
  CHECK_THAT(o.validate().message(), Catch::Contains("--loss-scale-interval must be >= 1"));
  const LossScaleOptions rule = TrainOptions{}.loss_scale_options();
  CHECK(rule.interval == 2000);
  CHECK(rule.max_skipped_in_a_row == 100);
  CHECK(rule.initial == 65536.0f);
}

namespace {

struct ReplicaRuns {
  std::vector<Expected<TrainResult>> results;
  std::vector<std::vector<float>> params;
};

// `n` replicas as threads over an in-process group (ring all-reduce: the wire is used), each
// comparing parameter checksums every 5 steps; `adjust` may change each one's Replica.
ReplicaRuns run_replicas(int n, const TrainOptions& o, const Dataset& train, const Dataset& test,
                         const std::function<void(Replica&)>& adjust = {}) {
  ReplicaRuns run{std::vector<Expected<TrainResult>>(n, Expected<TrainResult>(internal_error("not run"))),
                  std::vector<std::vector<float>>(n)};
  auto transports = collectives::make_inproc_group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      Replica replica;
      replica.comm = &comm;
      replica.checksum_every = 5;  // replicas that updated differently would differ here
      replica.timeout = std::chrono::seconds(20);
      if (adjust) adjust(replica);
      run.results[r] = train_replica(o, train, test, replica, {}, &run.params[r]);
    });
  }
  for (auto& t : threads) t.join();
  return run;
}

}  // namespace

TEST_CASE("precision: f16 sync replicas skip the same overflowing steps and hold the same parameters",
          "[precision][sync]") {
  const Dataset train = blobs(1200, 3, 6, 7), test = blobs(300, 3, 6, 8);
  TrainOptions o = f16_blobs(3);
  o.loss_scale = 16777216.0f;  // 2^24: the first steps overflow f16 and are skipped on both replicas
  const int n = 2;
  ReplicaRuns run = run_replicas(n, o, train, test);
  auto& results = run.results;
  auto& params = run.params;
  for (int r = 0; r < n; ++r) {
    INFO("replica " << r);
    REQUIRE(results[r].ok());
    CHECK(results[r]->precision == "f16");
    CHECK(results[r]->overflow_steps == results[0]->overflow_steps);
    CHECK(results[r]->overflow_steps >= 3);    // halved from 2^24 until the gradients fit
    CHECK(results[r]->overflow_steps <= 12);
    CHECK(results[r]->loss_scale == results[0]->loss_scale);
    CHECK(results[r]->loss_scale >= 1.0f);
    CHECK(results[r]->test_accuracy >= 0.95);  // blobs are easy: f16 learns them as f32 does
  }
  CHECK(params[0] == params[1]);
}

TEST_CASE("precision: gradients all-reduced in bf16 keep the replicas identical and close to an f32 wire",
          "[precision][sync]") {
  const Dataset train = blobs(1200, 3, 6, 7), test = blobs(300, 3, 6, 8);
  TrainOptions o;
  o.hidden = {32};
  o.epochs = 2;
  o.batch_size = 60;
  o.seed = 5;
  o.precision = DType::bf16;
  auto run = [&](DType wire, size_t bucket_bytes) {
    const int n = 3;
    ReplicaRuns runs = run_replicas(n, o, train, test, [&](Replica& replica) {
      replica.bucket_bytes = bucket_bytes;
      replica.grad_wire = wire;
    });
    auto& results = runs.results;
    auto& params = runs.params;
    for (int r = 0; r < n; ++r) {
      INFO("replica " << r);
      REQUIRE(results[r].ok());
      CHECK(results[r]->test_accuracy >= 0.95);
      CHECK(results[r]->history.back().train_accuracy == results[0]->history.back().train_accuracy);
    }
    CHECK(params[1] == params[0]);
    CHECK(params[2] == params[0]);
    return params[0];
  };
  const std::vector<float> f32 = run(DType::f32, 0);
  for (size_t bucket_bytes : {size_t{0}, size_t{1024}}) {  // one all-reduce, and buckets
    CAPTURE(bucket_bytes);
    const std::vector<float> bf = run(DType::bf16, bucket_bytes);
    CHECK(relative_difference(bf, f32) > 0);     // the wire rounded partial sums
    CHECK(relative_difference(bf, f32) < 0.02);  // to bf16's precision, not more
  }
}

TEST_CASE("precision: the GPU trainers' options take bf16 and f16 (the loss scaled on the device)",
          "[precision]") {
  TrainOptions gpu;
  gpu.device = Device::cuda(0);
  gpu.precision = DType::bf16;
  CHECK(gpu.validate().ok());
  gpu.precision = DType::f16;
  CHECK(gpu.validate().ok());
  gpu.loss_scale = 0.5f;  // the scale's start is checked alike on every device
  CHECK_THAT(gpu.validate().message(), Catch::Contains("--loss-scale"));
}
