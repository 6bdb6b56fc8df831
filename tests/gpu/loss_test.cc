// Fused softmax cross-entropy against cpu::softmax_xent: loss, gradient, correct count, the
// accumulate-into-device-scalars contract and the NaN for bad labels.
#include <cmath>
#include <utility>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/ops.h"

namespace troupe {
namespace {

using test::DeviceArray;
namespace kc = kernels::cuda;

std::vector<int32_t> random_labels(int rows, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> l(rows);
  for (auto& v : l) v = static_cast<int32_t>(rng() % classes);
  return l;
}

TEST_CASE("cuda softmax_xent matches cpu softmax_xent", "[gpu][loss]") {
  const std::pair<int, int> shapes[] = {{1, 1}, {1, 10}, {7, 3}, {128, 10}, {257, 33}, {1021, 97}, {4099, 10},
                                        {13, 1024}};
  for (auto [rows, classes] : shapes) {
    for (bool alias : {false, true}) {
      CAPTURE(rows, classes, alias);
      // Logits of +-8 make the softmax far from uniform, so the max subtraction matters.
      auto logits = test::random_floats(size_t(rows) * classes, rows * 7 + classes, -8.0f, 8.0f);
      auto labels = random_labels(rows, classes, rows + classes);
      std::vector<float> ref_d(logits.size());
      int64_t ref_correct = 0;
      const float ref_loss = kernels::cpu::softmax_xent(logits.data(), labels.data(), rows, classes, ref_d.data(),
                                                        &ref_correct);
      DeviceArray<float> dl(logits), dd(logits.size()), loss(std::vector<float>{0.5f});
      DeviceArray<int32_t> dlab(labels);
      DeviceArray<unsigned long long> correct(std::vector<unsigned long long>{3});
      float* dlogits = alias ? dl.get() : dd.get();
      REQUIRE(kc::softmax_xent(dl.get(), dlab.get(), rows, classes, dlogits, loss.get(), correct.get()).ok());
      // Accumulates: the 0.5 and 3 already there stay. The loss is a mean of rows terms each
      // within a few ulps (expf/logf vs std::exp/std::log, different summation order): relative
      // 1e-5 leaves room for that and catches any wrong term.
      CHECK(loss.host()[0] - 0.5f == Approx(ref_loss).epsilon(1e-5).margin(1e-6));
      CHECK(correct.host()[0] == static_cast<unsigned long long>(ref_correct) + 3);
      // Each gradient entry is (p - onehot) / rows with p from one expf and a sum over classes:
      // within (classes + 4) ulps of 1 / rows in absolute terms.
      auto got = alias ? dl.host() : dd.host();
      const double tol = (classes + 4) * test::kF32Eps / rows;
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::fabs(got[i] - ref_d[i]) > tol) FAIL("dlogits[" << i << "] " << got[i] << " vs " << ref_d[i]);
      }
    }
  }
}

TEST_CASE("cuda softmax_xent: ties go to the first class, bad labels give NaN, null outputs are fine",
          "[gpu][loss]") {
  std::vector<float> logits{1, 3, 3, 0, /**/ 2, 2, 2, 2, /**/ 0, 0, 5, 1};
  std::vector<int32_t> labels{1, 0, 7};  // row 3's label is out of range
  DeviceArray<float> dl(logits), loss(1);
  DeviceArray<int32_t> dlab(labels);
  DeviceArray<unsigned long long> correct(1);
  REQUIRE(kc::softmax_xent(dl.get(), dlab.get(), 3, 4, nullptr, loss.get(), correct.get()).ok());
  CHECK(correct.host()[0] == 2);  // rows 1 and 2 (arg-max 1 and 0); row 3 never counts
  CHECK(std::isnan(loss.host()[0]));
  REQUIRE(kc::softmax_xent(dl.get(), dlab.get(), 3, 4, nullptr, nullptr, nullptr).ok());
  CHECK(kc::softmax_xent(dl.get(), dlab.get(), 3, 1025, nullptr, nullptr, nullptr).code() ==
        Code::invalid_argument);
  CHECK(kc::softmax_xent(dl.get(), dlab.get(), 0, 4, nullptr, loss.get(), nullptr).ok());  // nothing to do
}

}  // namespace
}  // namespace troupe
