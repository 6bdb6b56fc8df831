// Optimizer kernels against kernels::cpu over several steps, including Adam's device step counter.
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/ops.h"

namespace troupe {
namespace {

using test::DeviceArray;
namespace kc = kernels::cuda;

// Element-wise updates whose only freedom is FMA contraction on the GPU (the CPU kernels are built
// without it): each step may differ by an ulp or two of the terms it adds, and over 5 steps the
// results drift apart by at most ~10 ulps of the terms' magnitude: relative 1e-5 (about 80 ulps)
// plus `absolute` for results near zero, 1e-7 unless the terms are larger than the results: SGD's
// velocity adds gradients in [-1, 1] to a velocity of up to ~4 (momentum 0.9), an ulp of 4 is
// 4.8e-7, and where the steps' gradients nearly cancel the result keeps their rounding (seen:
// 0.00427138 against 0.00427157), so it is checked with 1e-6.
void check_close(const std::vector<float>& got, const std::vector<float>& ref, const char* what,
                 double absolute = 1e-7) {
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - ref[i]) > 1e-5 * std::fabs(ref[i]) + absolute) {
      FAIL(what << "[" << i << "] = " << got[i] << " on the GPU, " << ref[i] << " on the CPU");
    }
  }
}

TEST_CASE("cuda sgd_step matches cpu sgd_step over 5 steps", "[gpu][optim]") {
  for (size_t n : test::test_sizes()) {
    for (int variant = 0; variant < 4; ++variant) {
      kernels::cpu::SgdParams hp;
      hp.lr = 0.05f;
      hp.momentum = variant == 0 ? 0.0f : 0.9f;
      hp.weight_decay = variant >= 2 ? 1e-3f : 0.0f;
      hp.nesterov = variant == 3;
      CAPTURE(n, variant);
      auto p = test::random_floats(n, n + 11);
      std::vector<float> vel(n, 0.0f);
      DeviceArray<float> dp(p), dv(vel);
      for (int step = 0; step < 5; ++step) {
        auto g = test::random_floats(n, n * 17 + step);
        kernels::cpu::sgd_step(p.data(), g.data(), vel.data(), n, hp);
        DeviceArray<float> dg(g);
        REQUIRE(kc::sgd_step(dp.get(), dg.get(), hp.momentum == 0 ? nullptr : dv.get(), n, hp).ok());
      }
      check_close(dp.host(), p, "params");
      check_close(dv.host(), vel, "velocity", 1e-6);
    }
  }
  kernels::cpu::SgdParams hp;
  hp.momentum = 0.9f;
  DeviceArray<float> x(4);
  CHECK(kc::sgd_step(x.get(), x.get(), nullptr, 4, hp).code() == Code::invalid_argument);
}

TEST_CASE("cuda adam_step matches cpu adam_step over 5 steps, step read from the device", "[gpu][optim]") {
  for (size_t n : test::test_sizes()) {
    for (bool decoupled : {false, true}) {
      kernels::cpu::AdamParams hp;
      hp.lr = 1e-2f;
      hp.weight_decay = 1e-2f;
      hp.decoupled = decoupled;
      CAPTURE(n, decoupled);
      auto p = test::random_floats(n, n + 5);
      std::vector<float> m(n, 0.0f), v(n, 0.0f);
      DeviceArray<float> dp(p), dm(m), dv(v);
      // Steps done before: 2 (as a graph would keep them); this call's steps are 3 .. 7.
      DeviceArray<int64_t> base(std::vector<int64_t>{2});
      // Two warm-up steps on both sides first, so the counter path continues a real trajectory.
      for (int64_t step = 1; step <= 7; ++step) {
        auto g = test::random_floats(n, n * 13 + step);
        kernels::cpu::adam_step(p.data(), g.data(), m.data(), v.data(), n, step, hp);
        DeviceArray<float> dg(g);
        kc::DeviceStep at;
        if (step <= 2) {
          at.offset = step;
        } else {
          at.steps_done = base.get();
          at.offset = step - 2;
        }
        REQUIRE(kc::adam_step(dp.get(), dg.get(), dm.get(), dv.get(), n, at, hp).ok());
      }
      check_close(dp.host(), p, "params");
      check_close(dm.host(), m, "m");
      check_close(dv.host(), v, "v");
    }
  }
  DeviceArray<float> x(4);
  kc::DeviceStep zero;
  zero.offset = 0;
  CHECK(kc::adam_step(x.get(), x.get(), x.get(), x.get(), 4, zero, {}).code() == Code::invalid_argument);
}

TEST_CASE("cuda optimizers take the rate of each step from a device table", "[gpu][optim]") {
  const size_t n = 1021;
  const std::vector<float> rates{0.1f, 0.05f, 0.02f, 0.01f};  // rates of steps 1 .. 4
  DeviceArray<float> table(rates);
  DeviceArray<int64_t> done(std::vector<int64_t>{0});
  auto p = test::random_floats(n, 1), pa = p;
  std::vector<float> vel(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  DeviceArray<float> dp(p), dpa(pa), dvel(vel), dm(m), dv(v);
  kernels::cpu::SgdParams sgd;
  sgd.lr = 123.0f;  // ignored: the table wins
  sgd.momentum = 0.9f;
  kernels::cpu::AdamParams adam;
  adam.lr = 123.0f;
  // Two "chunks" of two steps: offsets 1, 2 from the counter, which advances by 2 after each.
  for (int64_t step = 1; step <= 4; ++step) {
    auto g = test::random_floats(n, 100 + step);
    DeviceArray<float> dg(g);
    kc::DeviceStep at;
    at.steps_done = done.get();
    at.offset = (step - 1) % 2 + 1;
    at.lr_table = table.get();
    REQUIRE(kc::sgd_step(dp.get(), dg.get(), dvel.get(), n, sgd, at).ok());
    REQUIRE(kc::adam_step(dpa.get(), dg.get(), dm.get(), dv.get(), n, at, adam).ok());
    if (step % 2 == 0) REQUIRE(kc::add_to_counter(done.get(), 2).ok());
    kernels::cpu::SgdParams s = sgd;
    s.lr = rates[step - 1];
    kernels::cpu::sgd_step(p.data(), g.data(), vel.data(), n, s);
    kernels::cpu::AdamParams a = adam;
    a.lr = rates[step - 1];
    kernels::cpu::adam_step(pa.data(), g.data(), m.data(), v.data(), n, step, a);
  }
  check_close(dp.host(), p, "sgd params");
  check_close(dpa.host(), pa, "adam params");
  CHECK(done.host()[0] == 4);
}

TEST_CASE("cuda add_to_counter advances a device counter", "[gpu][optim]") {
  DeviceArray<int64_t> c(std::vector<int64_t>{5});
  REQUIRE(kc::add_to_counter(c.get(), 64).ok());
  REQUIRE(kc::add_to_counter(c.get(), 3).ok());
  CHECK(c.host()[0] == 72);
}

}  // namespace
}  // namespace troupe
