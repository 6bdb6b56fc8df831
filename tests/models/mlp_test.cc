// The MLP: its flat-buffer layout, initialisation, FLOP count, a finite-difference check of the whole
// forward_backward, and training on a small synthetic problem (accuracy and determinism).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "tests/support/numeric_test_util.h"
#include "trainers/local/local_trainer.h"
#include "models/mlp/mlp.h"

using namespace troupe;
using troupe::testing::central_difference;
using troupe::testing::gradients_agree;
using troupe::testing::random_floats;

namespace {

MlpLayout layout_of(std::vector<int> dims) {
  auto l = MlpLayout::make(std::move(dims));
  REQUIRE(l.ok());
  return *l;
}

// Forward pass in double written from the layout's documented semantics. Returns the mean
// cross-entropy and, in `mask`, which hidden units are active (pre-activation > 0) per row.
double reference_loss(const MlpLayout& L, const std::vector<float>& p, const std::vector<float>& x,
                      const std::vector<int32_t>& y, int batch, std::vector<bool>* mask) {
  mask->clear();
  double total = 0;
  for (int r = 0; r < batch; ++r) {
    std::vector<double> h(x.begin() + static_cast<long>(r) * L.in(0), x.begin() + static_cast<long>(r + 1) * L.in(0));
    for (int l = 0; l < L.layers(); ++l) {
      std::vector<double> o(L.out(l));
      for (int j = 0; j < L.out(l); ++j) {
        double s = p[L.bias_offset[l] + j];
        for (int i = 0; i < L.in(l); ++i) s += h[i] * p[L.weight_offset[l] + static_cast<size_t>(i) * L.out(l) + j];
        if (l + 1 < L.layers()) {
          mask->push_back(s > 0);
          s = s > 0 ? s : 0;
        }
        o[j] = s;
      }
      h = o;
    }
    double mx = h[0];
    for (double v : h) mx = std::max(mx, v);
    double sum = 0;
    for (double v : h) sum += std::exp(v - mx);
    total += std::log(sum) - (h[y[r]] - mx);
  }
  return total / batch;
}

// `count` examples in `classes` well separated Gaussian blobs in `side` x `side` "pixels".
Dataset blobs(int count, int classes, int side, uint64_t seed) {
  Dataset d;
  d.count = count;
  d.rows = d.cols = side;
  d.classes = classes;
  const int f = side * side;
  auto centers = random_floats(static_cast<size_t>(classes) * f, 99, 0.0f, 1.0f);  // same for every split
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);  // Bayes accuracy ~99%: learnable, not trivial
  for (int i = 0; i < count; ++i) {
    const int c = i % classes;
    d.labels.push_back(c);
    for (int j = 0; j < f; ++j) d.images.push_back(centers[static_cast<size_t>(c) * f + j] + noise(rng));
  }
  return d;
}

TrainOptions small_job(uint64_t seed) {
  TrainOptions o;
  o.hidden = {16};
  o.epochs = 4;
  o.batch_size = 20;
  o.lr = 0.01f;
  o.seed = seed;
  return o;
}

}  // namespace

TEST_CASE("MlpLayout::make lays weights and biases out layer by layer", "[mlp]") {
  MlpLayout l = layout_of({784, 256, 128, 10});
  CHECK(l.layers() == 3);
  CHECK(l.weight_offset == std::vector<size_t>{0, 200960, 233856});
  CHECK(l.bias_offset == std::vector<size_t>{200704, 233728, 235136});
  CHECK(l.param_count == 235146);
  CHECK(l.to_string() == "784-256-128-10 (235146 parameters)");
  MlpLayout one = layout_of({3, 2});
  CHECK(one.param_count == 8);
  CHECK(one.bias_offset == std::vector<size_t>{6});
}

TEST_CASE("MlpLayout::make refuses fewer than two sizes and sizes below 1", "[mlp]") {
  for (auto dims : std::vector<std::vector<int>>{{}, {10}, {10, 0}, {10, -3, 2}, {0, 5}}) {
    auto l = MlpLayout::make(dims);
    REQUIRE_FALSE(l.ok());
    CHECK(l.status().code() == Code::invalid_argument);
  }
}

TEST_CASE("flops_per_sample counts forward, weight and input gradients", "[mlp]") {
  // Per layer 2 * in * out for the forward and for dW; 2 * in * out for dX except the first layer.
  CHECK(layout_of({784, 256, 128, 10}).flops_per_sample() ==
        2.0 * (2 * 784 * 256 + 3 * 256 * 128 + 3 * 128 * 10));
  CHECK(layout_of({5, 3}).flops_per_sample() == 2.0 * 2 * 15);
}

TEST_CASE("mlp_init is deterministic and stays within +-1/sqrt(fan_in)", "[mlp]") {
  MlpLayout l = layout_of({50, 20, 3});
  std::vector<float> a(l.param_count), b(l.param_count), c(l.param_count);
  mlp_init(l, 7, a.data());
  mlp_init(l, 7, b.data());
  mlp_init(l, 8, c.data());
  CHECK(a == b);
  CHECK(a != c);
  for (int layer = 0; layer < l.layers(); ++layer) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(l.in(layer)));
    const size_t begin = l.weight_offset[layer], end = l.bias_offset[layer] + l.out(layer);
    double largest = 0;
    for (size_t i = begin; i < end; ++i) {
      REQUIRE(std::fabs(a[i]) <= bound);
      largest = std::max(largest, static_cast<double>(std::fabs(a[i])));
    }
    CHECK(largest > 0.8 * bound);  // the range is used, not a constant or a narrower spread
  }
}

TEST_CASE("MlpCpu::forward_backward matches finite differences of evaluate", "[mlp][gradcheck]") {
  // Every parameter of a 7-5-4-3 MLP on a batch of 6. The network is piecewise smooth: where a
  // +-eps step flips a hidden ReLU (a pre-activation crosses 0) the central difference straddles a
  // kink and means nothing, so such parameters are skipped. The double-precision reference forward
  // tells which, and must skip few. Tolerance as in tests/kernels/gradcheck_test.cc: f32 rounding
  // noise ~ulp(loss) / eps ~1e-5, accepted |numeric - analytic| <= 5e-4 + 1e-2 * |gradient|.
  MlpLayout l = layout_of({7, 5, 4, 3});
  const int batch = 6;
  const float eps = 1e-2f;
  std::vector<float> p(l.param_count);
  mlp_init(l, 3, p.data());
  auto x = random_floats(static_cast<size_t>(batch) * 7, 4);
  std::vector<int32_t> y = {0, 1, 2, 2, 1, 0};
  MlpCpu model(l);
  std::vector<float> g(l.param_count);
  int64_t correct = -1;
  const float loss = model.forward_backward(p.data(), x.data(), y.data(), batch, g.data(), &correct);
  std::vector<bool> mask0, mask;
  const double ref = reference_loss(l, p, x, y, batch, &mask0);
  REQUIRE(loss == Approx(ref).epsilon(1e-5));
  REQUIRE(correct >= 0);

  auto eval = [&] { return static_cast<double>(model.evaluate(p.data(), x.data(), y.data(), batch, nullptr)); };
  int checked = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const float saved = p[i];
    bool kink = false;
    for (float s : {saved + eps, saved - eps}) {
      p[i] = s;
      reference_loss(l, p, x, y, batch, &mask);
      kink = kink || mask != mask0;
    }
    p[i] = saved;
    if (kink) continue;
    const double numeric = central_difference(&p[i], eps, eval);
    INFO("parameter " << i << ": analytic " << g[i] << ", numeric " << numeric);
    REQUIRE(gradients_agree(numeric, g[i], 1e-2, 5e-4));
    ++checked;
  }
  CHECK(checked >= static_cast<int>(p.size()) * 3 / 4);
}

TEST_CASE("MlpCpu gives the same results whatever batch sizes it saw before", "[mlp]") {
  // The workspace grows with the largest batch; a smaller batch afterwards uses a prefix of it.
  MlpLayout l = layout_of({9, 6, 4});
  std::vector<float> p(l.param_count);
  mlp_init(l, 1, p.data());
  auto x = random_floats(9 * 10, 2);
  std::vector<int32_t> y = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1};
  std::vector<float> g_fresh(l.param_count), g_reused(l.param_count), scratch(l.param_count);
  MlpCpu fresh(l), reused(l);
  const float want = fresh.forward_backward(p.data(), x.data(), y.data(), 5, g_fresh.data(), nullptr);
  reused.forward_backward(p.data(), x.data(), y.data(), 2, scratch.data(), nullptr);
  reused.forward_backward(p.data(), x.data(), y.data(), 10, scratch.data(), nullptr);
  const float got = reused.forward_backward(p.data(), x.data(), y.data(), 5, g_reused.data(), nullptr);
  CHECK(got == want);
  CHECK(g_reused == g_fresh);
  CHECK(reused.evaluate(p.data(), x.data(), y.data(), 5, nullptr) == want);
}

TEST_CASE("train_mlp_cpu learns separable blobs to high accuracy", "[mlp][train]") {
  const Dataset train = blobs(600, 3, 4, 1), test = blobs(300, 3, 4, 2);
  auto r = train_mlp_cpu(small_job(1), train, test);
  REQUIRE(r.ok());
  CHECK(r->epochs == 4);
  CHECK(r->steps == 4 * (600 / 20));
  CHECK(r->test_accuracy > 0.95);
  CHECK(r->history.back().train_loss < r->history.front().train_loss);
}

TEST_CASE("train_mlp_cpu is deterministic for a seed and differs across seeds", "[mlp][train]") {
  const Dataset train = blobs(200, 3, 4, 3), test = blobs(60, 3, 4, 4);
  auto a = train_mlp_cpu(small_job(5), train, test);
  auto b = train_mlp_cpu(small_job(5), train, test);
  auto c = train_mlp_cpu(small_job(6), train, test);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  REQUIRE(a->history.size() == b->history.size());
  bool differs = false;
  for (size_t e = 0; e < a->history.size(); ++e) {
    // Bit-identical: same initial parameters, same batch order, same single-threaded arithmetic.
    CHECK(a->history[e].train_loss == b->history[e].train_loss);
    CHECK(a->history[e].train_accuracy == b->history[e].train_accuracy);
    CHECK(a->history[e].test_accuracy == b->history[e].test_accuracy);
    differs = differs || a->history[e].train_loss != c->history[e].train_loss;
  }
  CHECK(differs);
}
