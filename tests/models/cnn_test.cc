// The built-in CNN trainer (models/cnn/cnn.h, cnn_trainer.cc) through the trainer API: its parameter
// layout, its loss and every gradient against a double-precision forward written here from the
// documented architecture (central differences), its LayerModel against forward_backward, clear
// refusals of data and settings it cannot take, and training on small synthetic images. Its
// Fashion-MNIST accuracy is tested in cnn_accuracy_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/core/temp_dir.h"
#include "trainers/local/local_trainer.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
using troupe::testing::first_difference;
using troupe::testing::gradients_agree;
using troupe::testing::random_floats;

namespace {

// A CNN small enough to check every parameter: 8x8 images, conv3x3 3-4, dense 5-3.
struct Tiny {
  int side = 8, kernel = 3, classes = 3, batch = 3;
  std::vector<int> channels{3, 4}, widths{5, 3};  // widths: dense hidden, then classes
};

TrainOptions cnn_job(std::vector<std::string> args) {
  TrainOptions o;
  o.model = "cnn";
  o.trainer_args = std::move(args);
  o.seed = 7;
  return o;
}

TrainerSetup tiny_setup(const Tiny& t) {
  auto s = set_up_trainer(cnn_job({"channels=3,4", "kernel=3", "hidden=5"}), DataSpec{t.side * t.side, t.classes}, 0, 1);
  REQUIRE(s.ok());
  return std::move(*s);
}

const double* block(const ParameterSpace& space, const std::vector<double>& p, const std::string& name) {
  for (const ParamBlock& b : space.blocks())
    if (b.name == name) return p.data() + b.param.offset;
  FAIL("no parameter block " << name);
  return nullptr;
}

// The mean cross-entropy of the documented network in double. `pattern` receives every ReLU's
// on/off state and every pooling window's arg-max: where a parameter step changes it, a central
// difference straddles a kink.
double reference_loss(const Tiny& t, const ParameterSpace& space, const std::vector<double>& p,
                      const std::vector<float>& x, const std::vector<int32_t>& y, std::vector<int>* pattern) {
  pattern->clear();
  double total = 0;
  for (int n = 0; n < t.batch; ++n) {
    int side = t.side, cin = 1;
    std::vector<double> h(x.begin() + n * side * side, x.begin() + (n + 1) * side * side);
    for (size_t b = 0; b < t.channels.size(); ++b) {
      const int cout = t.channels[b], k = t.kernel, pad = k / 2, half = side / 2;
      const double* w = block(space, p, "conv" + std::to_string(b) + ".w");
      const double* bias = block(space, p, "conv" + std::to_string(b) + ".b");
      std::vector<double> conv(static_cast<size_t>(cout) * side * side), pooled(static_cast<size_t>(cout) * half * half);
      for (int o = 0; o < cout; ++o)
        for (int i = 0; i < side; ++i)
          for (int j = 0; j < side; ++j) {
            double s = bias[o];
            for (int c = 0; c < cin; ++c)
              for (int di = 0; di < k; ++di)
                for (int dj = 0; dj < k; ++dj) {
                  const int ii = i + di - pad, jj = j + dj - pad;
                  if (ii >= 0 && ii < side && jj >= 0 && jj < side)
                    s += h[(c * side + ii) * side + jj] * w[((o * cin + c) * k + di) * k + dj];
                }
            pattern->push_back(s > 0);
            conv[(o * side + i) * side + j] = std::max(s, 0.0);
          }
      for (int o = 0; o < cout; ++o)
        for (int i = 0; i < half; ++i)
          for (int j = 0; j < half; ++j) {
            int best = (o * side + 2 * i) * side + 2 * j;
            for (int at : {best + 1, best + side, best + side + 1})
              if (conv[at] > conv[best]) best = at;
            pattern->push_back(best);
            pooled[(o * half + i) * half + j] = conv[best];
          }
      h = pooled;
      side = half;
      cin = cout;
    }
    for (size_t d = 0; d < t.widths.size(); ++d) {
      const int in = static_cast<int>(h.size()), out = t.widths[d];
      const double* w = block(space, p, "dense" + std::to_string(d) + ".w");
      const double* bias = block(space, p, "dense" + std::to_string(d) + ".b");
      std::vector<double> o(out);
      for (int j = 0; j < out; ++j) {
        double s = bias[j];
        for (int i = 0; i < in; ++i) s += h[i] * w[i * out + j];
        const bool relu = d + 1 < t.widths.size();
        if (relu) pattern->push_back(s > 0);
        o[j] = relu ? std::max(s, 0.0) : s;
      }
      h = o;
    }
    const double mx = *std::max_element(h.begin(), h.end());
    double sum = 0;
    for (double v : h) sum += std::exp(v - mx);
    total += std::log(sum) - (h[y[n]] - mx);
  }
  return total / t.batch;
}

// Records the blocks announced ready, in order.
class ReadyLog final : public GradientHook {
 public:
  void ready(const Param& p) override { order.push_back(p.index); }
  std::vector<int> order;
};

}  // namespace

TEST_CASE("cnn declares its blocks layer by layer and describes itself", "[cnn]") {
  auto s = set_up_trainer(cnn_job({"hidden=256"}), DataSpec{784, 10}, 0, 1);
  REQUIRE(s.ok());
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const ParamBlock& b : s->space.blocks()) {
    names.push_back(b.name);
    shapes.push_back(b.shape);
  }
  CHECK(names == std::vector<std::string>{"conv0.w", "conv0.b", "conv1.w", "conv1.b", "dense0.w", "dense0.b",
                                          "dense1.w", "dense1.b"});
  CHECK(shapes == std::vector<std::vector<int64_t>>{{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {3136, 256}, {256},
                                                    {256, 10}, {10}});
  CHECK(s->model == "cnn 28x28 conv3x3 32-64 dense 256-10 (824458 parameters)");
  CHECK(s->space.size() == 824458);
  REQUIRE(s->trainer->layers() != nullptr);
  const std::vector<LayerInfo> layers = s->trainer->layers()->layer_infos();
  REQUIRE(layers.size() == 4);
  CHECK(layers[0].out_features == 32 * 14 * 14);
  CHECK(layers[1].out_features == 64 * 7 * 7);
  CHECK(layers[1].flops_per_example == 6.0 * (64 * 32 * 9) * (14 * 14));
  CHECK(layers[3].out_features == 10);
}

TEST_CASE("cnn forward_backward matches central differences of the reference network", "[cnn][gradcheck]") {
  // Every parameter of the tiny CNN on a batch of 3. The reference runs in double, so the central
  // difference (step 1e-4) is exact to ~1e-8 wherever no ReLU or pooling choice flips within the
  // step (those parameters are skipped; few may be). The analytic gradient is f32: accepted
  // |numeric - analytic| <= 1e-5 + 1e-3 * |gradient|, far below a wrong index, transpose or scale.
  const Tiny t;
  TrainerSetup s = tiny_setup(t);
  std::vector<float> params(s.space.size()), grads(s.space.size());
  init_parameters(s.space, 3, params.data());
  auto x = random_floats(static_cast<size_t>(t.batch) * t.side * t.side, 4, 0.0f, 1.0f);
  const std::vector<int32_t> y = {2, 0, 1};
  Batch batch{x.data(), y.data(), t.batch, t.side * t.side};
  ReadyLog log;
  Gradients g(grads.data(), grads.size(), &log);
  auto stats = s.trainer->forward_backward(batch, Parameters(params.data(), params.size()), g);
  REQUIRE(stats.ok());

  std::vector<double> p(params.begin(), params.end());
  std::vector<int> pattern0, pattern;
  const double loss = reference_loss(t, s.space, p, x, y, &pattern0);
  CHECK(stats->loss == Approx(loss).epsilon(1e-5));
  auto evaluated = s.trainer->evaluate(batch, Parameters(params.data(), params.size()));
  REQUIRE(evaluated.ok());
  CHECK(evaluated->loss == Approx(loss).epsilon(1e-5));
  CHECK(evaluated->correct == stats->correct);
  // Every block announced once, last layer first.
  CHECK(log.order == std::vector<int>{7, 6, 5, 4, 3, 2, 1, 0});

  const double eps = 1e-4;
  size_t checked = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double saved = p[i];
    p[i] = saved + eps;
    const double up = reference_loss(t, s.space, p, x, y, &pattern);
    bool kink = pattern != pattern0;
    p[i] = saved - eps;
    const double down = reference_loss(t, s.space, p, x, y, &pattern);
    kink = kink || pattern != pattern0;
    p[i] = saved;
    if (kink) continue;
    const double numeric = (up - down) / (2 * eps);
    INFO("parameter " << i << ": analytic " << grads[i] << ", numeric " << numeric);
    REQUIRE(gradients_agree(numeric, grads[i], 1e-3, 1e-5));
    ++checked;
  }
  CHECK(checked >= p.size() * 9 / 10);
}

TEST_CASE("cnn as a LayerModel gives forward_backward's loss and gradients", "[cnn][pipeline]") {
  // The pipeline's path: forward_layer through the layers, output_loss, backward_layer in reverse
  // (each conv block recomputing its ReLU output and arg-max), gradients added into a view.
  const Tiny t;
  TrainerSetup s = tiny_setup(t);
  LayerModel& m = *s.trainer->layers();
  std::vector<float> params(s.space.size()), want(s.space.size()), got(s.space.size(), 0.0f);
  init_parameters(s.space, 5, params.data());
  const Parameters view(params.data(), params.size());
  auto x = random_floats(static_cast<size_t>(t.batch) * t.side * t.side, 6, 0.0f, 1.0f);
  const std::vector<int32_t> y = {1, 2, 0};
  Gradients want_view(want.data(), want.size());
  auto whole = s.trainer->forward_backward(Batch{x.data(), y.data(), t.batch, t.side * t.side}, view, want_view);
  REQUIRE(whole.ok());

  const std::vector<LayerInfo> layers = m.layer_infos();
  std::vector<std::vector<float>> outs;
  const float* in = x.data();
  for (size_t l = 0; l < layers.size(); ++l) {
    outs.emplace_back(static_cast<size_t>(t.batch) * layers[l].out_features);
    REQUIRE(m.forward_layer(static_cast<int>(l), in, t.batch, view, outs[l].data()).ok());
    in = outs[l].data();
  }
  std::vector<float> dout(outs.back().size());
  auto out_loss = m.output_loss(outs.back().data(), y.data(), t.batch, dout.data());
  REQUIRE(out_loss.ok());
  CHECK(out_loss->loss == whole->loss);
  Gradients got_view(got.data(), got.size());
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    const float* layer_in = l == 0 ? x.data() : outs[l - 1].data();
    std::vector<float> din(l == 0 ? 0 : outs[l - 1].size());
    REQUIRE(m.backward_layer(l, layer_in, outs[l].data(), dout.data(), t.batch, view, got_view,
                             l == 0 ? nullptr : din.data()).ok());
    dout = din;
  }
  CHECK(first_difference(got, want, 1e-6, 1e-7) == "");
}

TEST_CASE("cnn refuses data and settings it cannot take, saying what to do", "[cnn][errors]") {
  auto error = [](std::vector<std::string> args, int64_t features) {
    auto s = set_up_trainer(cnn_job(std::move(args)), DataSpec{features, 10}, 0, 1);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == Code::invalid_argument);
    return s.status().message();
  };
  CHECK_THAT(error({}, 785), Catch::Contains("785 values, which is not a square image") &&
                                 Catch::Contains("use the mlp trainer"));
  CHECK_THAT(error({"kernel=4"}, 784), Catch::Contains("kernel=4 must be odd"));
  CHECK_THAT(error({"kernel=29"}, 784), Catch::Contains("at most the image's shorter side 28"));
  CHECK_THAT(error({"channels=8,8,8,8,8"}, 784), Catch::Contains("5 conv blocks") && Catch::Contains("at most 4 fit"));
  CHECK_THAT(error({"channels="}, 784), Catch::Contains("channels is empty"));
  CHECK_THAT(error({"channels=32,0"}, 784), Catch::Contains("channels: size 0 must be in [1, 4096]"));
  CHECK_THAT(error({"hidden=-3"}, 784), Catch::Contains("hidden: size -3"));
  CHECK_THAT(error({"chanels=16"}, 784), Catch::Contains("unknown setting 'chanels'"));
  CHECK_THAT(error({"kernel=five"}, 784), Catch::Contains("'kernel' = 'five' is not an integer"));
}

TEST_CASE("cnn trains on small synthetic images through the runtime", "[cnn][train]") {
  const Dataset train = blobs(600, 4, 8, 1), test = blobs(200, 4, 8, 2);
  TrainOptions o = cnn_job({"channels=4,8", "kernel=3", "hidden=16"});
  o.epochs = 8;
  o.batch_size = 20;
  o.lr = 0.01f;
  auto r = train_with_trainer(o, train, test);
  REQUIRE(r.ok());
  CHECK(r->model == "cnn 8x8 conv3x3 4-8 dense 16-4 (932 parameters)");
  CHECK(r->history.back().train_loss < r->history.front().train_loss);
  CHECK(r->test_accuracy > 0.95);
}

namespace {

// DataSpec of images of per-example `shape` (f32 as fed), 3 classes.
DataSpec image_spec(std::vector<int64_t> shape) {
  DataSpec d;
  d.features = 1;
  for (int64_t v : shape) d.features *= v;
  d.classes = 3;
  d.fields = {FieldSpec{"image", ValueType::f32, ValueType::u8, shape, false},
              FieldSpec{"label", ValueType::i32, ValueType::i64, {}, true}};
  return d;
}

}  // namespace

TEST_CASE("cnn takes HWC and CHW images of several channels, not square, alike", "[cnn]") {
  const int h = 6, w = 5, c = 3, batch = 4;
  auto hwc = set_up_trainer(cnn_job({"channels=4", "kernel=3", "hidden=5"}), image_spec({h, w, c}), 0, 1);
  auto chw = set_up_trainer(cnn_job({"channels=4", "kernel=3", "hidden=5"}), image_spec({c, h, w}), 0, 1);
  REQUIRE(hwc.ok());
  REQUIRE(chw.ok());
  CHECK(hwc->model == "cnn 6x5x3 hwc conv3x3 4 dense 5-3 (" + std::to_string(hwc->space.size()) + " parameters)");
  REQUIRE(hwc->space.size() == chw->space.size());
  std::vector<float> params(hwc->space.size());
  init_parameters(hwc->space, 3, params.data());
  const Parameters view(params.data(), params.size());
  const auto x_chw = random_floats(static_cast<size_t>(batch) * h * w * c, 9, 0.0f, 1.0f);
  std::vector<float> x_hwc(x_chw.size());
  for (int n = 0; n < batch; ++n)
    for (int k = 0; k < c; ++k)
      for (int p = 0; p < h * w; ++p) x_hwc[(n * h * w + p) * c + k] = x_chw[(n * c + k) * h * w + p];
  const std::vector<int32_t> y = {0, 2, 1, 2};
  std::vector<float> g_hwc(params.size()), g_chw(params.size()), g_layers(params.size(), 0.0f);
  Gradients gh(g_hwc.data(), g_hwc.size()), gc(g_chw.data(), g_chw.size()), gl(g_layers.data(), g_layers.size());
  auto a = hwc->trainer->forward_backward(Batch{x_hwc.data(), y.data(), batch, h * w * c}, view, gh);
  auto b = chw->trainer->forward_backward(Batch{x_chw.data(), y.data(), batch, h * w * c}, view, gc);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->loss == b->loss);
  CHECK(g_hwc == g_chw);  // the same CHW input after the transposition: bit for bit

  // The pipeline's path over HWC rows transposes in forward_layer and backward_layer alike.
  LayerModel& m = *hwc->trainer->layers();
  const std::vector<LayerInfo> layers = m.layer_infos();
  std::vector<std::vector<float>> outs;
  const float* in = x_hwc.data();
  for (size_t l = 0; l < layers.size(); ++l) {
    outs.emplace_back(static_cast<size_t>(batch) * layers[l].out_features);
    REQUIRE(m.forward_layer(static_cast<int>(l), in, batch, view, outs[l].data()).ok());
    in = outs[l].data();
  }
  std::vector<float> dout(outs.back().size());
  REQUIRE(m.output_loss(outs.back().data(), y.data(), batch, dout.data()).ok());
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    std::vector<float> din(l == 0 ? 0 : outs[l - 1].size());
    REQUIRE(m.backward_layer(l, l == 0 ? x_hwc.data() : outs[l - 1].data(), outs[l].data(), dout.data(), batch, view, gl,
                             l == 0 ? nullptr : din.data()).ok());
    dout = din;
  }
  CHECK(first_difference(g_layers, g_hwc, 1e-6, 1e-7) == "");

  auto error = [](std::vector<int64_t> shape, std::vector<std::string> args = {}) {
    auto s = set_up_trainer(cnn_job(std::move(args)), image_spec(std::move(shape)), 0, 1);
    REQUIRE_FALSE(s.ok());
    return s.status().message();
  };
  CHECK_THAT(error({3, 8, 4}), Catch::Contains("which side holds the channels? Say it with --trainer-arg order=hwc"));
  CHECK_THAT(error({2, 3, 4, 5}), Catch::Contains("[H, W], [H, W, C] or [C, H, W]"));
  CHECK_THAT(error({8, 8, 3}, {"order=nhwc"}), Catch::Contains("order=nhwc: hwc"));
  DataSpec windows = image_spec({64});
  windows.target_width = 64;  // --seq-len 64: a label per position
  CHECK(set_up_trainer(cnn_job({}), windows, 0, 1).status().message().find("64 labels per example") != std::string::npos);
  DataSpec values = image_spec({8, 8});
  values.classes = 0;  // --loss mse
  CHECK(set_up_trainer(cnn_job({}), values, 0, 1).status().message().find("values (--loss mse)") != std::string::npos);
  DataSpec two = image_spec({8, 8});
  two.fields.insert(two.fields.begin(), FieldSpec{"extra", ValueType::f32, ValueType::f32, {4}, false});
  two.features += 4;
  CHECK(set_up_trainer(cnn_job({}), two, 0, 1).status().message().find("name the image with --inputs") != std::string::npos);
  auto told = set_up_trainer(cnn_job({"order=chw", "channels=2"}), image_spec({3, 8, 4}), 0, 1);
  REQUIRE(told.ok());
  CHECK(told->model.rfind("cnn 8x4x3 chw", 0) == 0);
}

TEST_CASE("cnn learns RGB images from .npy files (u8, HWC)", "[cnn][train][data]") {
  troupe::testing::TempDir dir;
  // Class k: a bright square in channel k at a random place, on noise in every channel.
  const std::string script = dir.file("make.py");
  {
    std::ofstream f(script);
    f << "import numpy as np\nrng = np.random.default_rng(2)\n"
         "for split, n in (('train', 900), ('val', 300)):\n"
         "    y = rng.integers(0, 3, n); x = rng.integers(0, 90, (n, 12, 10, 3)).astype(np.uint8)\n"
         "    for i in range(n):\n"
         "        r, c = rng.integers(0, 8), rng.integers(0, 6); x[i, r:r+4, c:c+4, y[i]] = 230\n"
         "    np.save('" << dir.path() << "/x_%s.npy' % split, x); np.save('" << dir.path() << "/y_%s.npy' % split, y)\n";
  }
  REQUIRE(std::system(("/usr/bin/python3 " + script).c_str()) == 0);
  TrainOptions o = cnn_job({"channels=8", "kernel=3", "hidden=16"});
  o.data = dir.path();
  o.epochs = 4;
  o.batch_size = 30;
  o.lr = 0.01f;
  auto r = train_local(o, {});
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  CHECK(r->model.rfind("cnn 12x10x3 hwc", 0) == 0);
  CHECK(r->test_accuracy > 0.9);
}
