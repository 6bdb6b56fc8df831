// The whole GPT (models/gpt/gpt_model.cc) against finite differences: every element of every block
// (embeddings, each block's LayerNorms, attention and MLP, the final LayerNorm, the head, tied or
// not), central differences of the f32 forward with step 1e-2, accepted at
// |numeric - analytic| <= 3e-4 + 2e-2 |gradient| — above the forward's rounding (~1e-5 / 1e-2)
// and far below the gradient-sized errors a wrong transpose, a missing residual or a dropped
// term give. Parameters are drawn large (not the 0.02 of training) so the gradients are of order
// 0.01..1 and every term matters.
#include <catch2/catch.hpp>

#include <cmath>

#include "models/gpt/gpt_layers.h"
#include "models/gpt/gpt_model.h"
#include "tests/models/small_gpt.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;
using troupe::models::GptConfig;
using troupe::models::GptModel;
using troupe::testing::central_difference;
using troupe::testing::gradients_agree;
using troupe::testing::random_floats;
using troupe::testing::small_gpt;


TEST_CASE("the whole gpt's gradients match finite differences, tied and untied", "[models][gpt][gradcheck]") {
  const bool tie = GENERATE(false, true);
  GptModel model(small_gpt(tie));
  ParameterSpace space;
  model.declare(space);
  REQUIRE(space.status().ok());
  std::vector<float> params = random_floats(space.size(), 21, -0.5f, 0.5f);
  for (const ParamBlock& b : space.blocks())  // LayerNorm gains near 1
    if (b.name.find(".g") != std::string::npos)
      for (size_t i = 0; i < b.param.numel; ++i) params[b.param.offset + i] += 1.0f;
  const int64_t batch = 2, seq = 5;  // shorter than the context: positions 0..4 of 6
  const std::vector<int32_t> tokens{0, 3, 6, 2, 2, 5, 1, 4, 0, 6};
  const std::vector<int32_t> targets{3, 6, 2, 2, 1, 1, 4, 0, 6, 5};
  auto loss = [&] {
    auto l = model.forward(tokens, targets.data(), batch, seq, Parameters(params.data(), params.size()));
    REQUIRE(l.ok());
    return static_cast<double>(*l);
  };
  loss();
  std::vector<float> grads(space.size(), 0.0f);
  Gradients g(grads.data(), grads.size());
  model.backward(Parameters(params.data(), params.size()), g, 1.0f);
  double largest = 0;
  for (const ParamBlock& b : space.blocks()) {
    for (size_t i = 0; i < b.param.numel; ++i) {
      const size_t at = b.param.offset + i;
      const double numeric = central_difference(&params[at], 1e-2f, loss);
      largest = std::max(largest, std::fabs(numeric));
      INFO((tie ? "tied: " : "untied: ") << b.name << "[" << i << "]: analytic " << grads[at] << ", numeric " << numeric);
      REQUIRE(gradients_agree(numeric, grads[at], 2e-2, 3e-4));
    }
  }
  CHECK(largest > 0.05);  // the check compared gradients of some size, not only zeros
  SECTION("the loss scale multiplies every gradient") {
    std::vector<float> scaled(space.size(), 0.0f);
    Gradients gs(scaled.data(), scaled.size());
    loss();
    model.backward(Parameters(params.data(), params.size()), gs, 8.0f);
    for (size_t i = 0; i < grads.size(); ++i) REQUIRE(scaled[i] == Approx(8.0f * grads[i]).margin(1e-6));
  }
}

TEST_CASE("the gpt refuses windows longer than its context and ids outside its vocabulary", "[models][gpt]") {
  GptModel model(small_gpt(false));
  ParameterSpace space;
  model.declare(space);
  std::vector<float> params(space.size(), 0.1f);
  const Parameters p(params.data(), params.size());
  auto long_window = model.forward(std::vector<int32_t>(7, 1), nullptr, 1, 7, p);
  REQUIRE_FALSE(long_window.ok());
  CHECK(long_window.status().message().find("longer than the model's context of 6") != std::string::npos);
  auto bad_id = model.forward({1, 2, 7}, nullptr, 1, 3, p);
  REQUIRE_FALSE(bad_id.ok());
  CHECK(bad_id.status().message().find("token id 7 of window 0 is outside the model's vocabulary of 7 (--trainer-arg vocab)") !=
        std::string::npos);
}

TEST_CASE("gpt settings: heads must divide dim, the context must hold --seq-len, vocab must hold the data", "[models][gpt]") {
  auto config = [](std::map<std::string, std::string> kv, int64_t seq, int64_t vocab) {
    return GptConfig::from(JobConfig(std::move(kv)), seq, vocab);
  };
  auto ok = config({{"layers", "3"}, {"heads", "4"}, {"dim", "32"}, {"tie", "1"}}, 16, 20);
  REQUIRE(ok.ok());
  CHECK(ok->describe() == "L3 H4 D32 T16 V20 tied");
  auto heads = config({{"heads", "3"}, {"dim", "32"}}, 16, 20);
  REQUIRE_FALSE(heads.ok());
  CHECK(heads.status().message().find("--trainer-arg heads=3 does not divide dim=32") != std::string::npos);
  auto context = config({{"context", "8"}}, 16, 20);
  REQUIRE_FALSE(context.ok());
  CHECK(context.status().message().find("--seq-len 16 is longer than the model's context of 8 positions") != std::string::npos);
  auto vocab = config({{"vocab", "10"}}, 16, 20);
  REQUIRE_FALSE(vocab.ok());
  CHECK(vocab.status().message().find("the data's token ids reach 19, outside --trainer-arg vocab=10") != std::string::npos);
  auto unknown = config({{"depth", "3"}}, 16, 20);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("--trainer-arg depth") != std::string::npos);
  auto no_windows = config({}, 0, 20);
  REQUIRE_FALSE(no_windows.ok());
  CHECK(no_windows.status().message().find("give --seq-len") != std::string::npos);
}

// --precision bf16 / f16 (gpt_model.h): the products read rounded operands and accumulate in f32,
// so the gradients are f32's to within the type's rounding — near (a few tenths of a percent for
// bf16's 8 bits, less for f16's 11), not equal (the rounding happens) — and the model's layers
// (gpt_layers.h), which `--shard parameters` runs, give the whole model's gradients in the same
// precision, as LayerModel::computes_in promises.
TEST_CASE("the gpt in bf16 and f16: gradients within the type's rounding of f32's, and its layers give the whole "
          "model's", "[models][gpt][precision]") {
  const DType precision = GENERATE(DType::bf16, DType::f16);
  INFO(dtype_name(precision));
  GptModel model(small_gpt(false));
  ParameterSpace space;
  model.declare(space);
  REQUIRE(space.status().ok());
  std::vector<float> params = random_floats(space.size(), 23, -0.5f, 0.5f);
  const Parameters p(params.data(), params.size());
  const int64_t batch = 2, seq = 5;
  const std::vector<int32_t> tokens{0, 3, 6, 2, 2, 5, 1, 4, 0, 6};
  const std::vector<int32_t> targets{3, 6, 2, 2, 1, 1, 4, 0, 6, 5};
  auto whole = [&](DType type, float* loss) {
    model.set_precision(type);
    auto l = model.forward(tokens, targets.data(), batch, seq, p);
    REQUIRE(l.ok());
    *loss = *l;
    std::vector<float> grads(space.size(), 0.0f);
    Gradients g(grads.data(), grads.size());
    model.backward(p, g, 1.0f);
    return grads;
  };
  float loss32 = 0, loss_low = 0;
  const std::vector<float> g32 = whole(DType::f32, &loss32), low = whole(precision, &loss_low);
  const double diff = troupe::testing::relative_difference(low, g32);
  INFO("relative difference of the gradients: " << diff << "; losses " << loss_low << " and " << loss32);
  CHECK(diff > 1e-5);  // rounded
  CHECK(diff < (precision == DType::bf16 ? 3e-2 : 4e-3));
  CHECK(loss_low == Approx(loss32).epsilon(precision == DType::bf16 ? 1e-2 : 1e-3));
  CHECK(loss_low != loss32);

  // The same step through the layers, in the same precision.
  troupe::models::GptLayers layers(model, seq);
  model.set_precision(precision);
  REQUIRE(layers.computes_in(precision));
  REQUIRE_FALSE(layers.computes_in(DType::f32));
  const std::vector<LayerInfo> info = layers.layer_infos();
  const std::vector<float> ids(tokens.begin(), tokens.end());
  std::vector<std::vector<float>> outs(info.size());
  const float* in = ids.data();
  for (size_t l = 0; l < info.size(); ++l) {
    outs[l].resize(static_cast<size_t>(batch * info[l].out_features));
    REQUIRE(layers.forward_layer_kept(static_cast<int>(l), 0, in, batch, p, outs[l].data()).ok());
    in = outs[l].data();
  }
  std::vector<float> d(outs.back().size()), din;
  auto stats = layers.output_loss(outs.back().data(), targets.data(), batch, d.data());
  REQUIRE(stats.ok());
  CHECK(stats->loss == Approx(loss_low).epsilon(1e-6));
  std::vector<float> grads(space.size(), 0.0f);
  Gradients g(grads.data(), grads.size());
  for (int l = static_cast<int>(info.size()) - 1; l >= 0; --l) {
    din.assign(l == 0 ? 0 : static_cast<size_t>(batch * info[static_cast<size_t>(l - 1)].out_features), 0.0f);
    const float* layer_in = l == 0 ? ids.data() : outs[static_cast<size_t>(l - 1)].data();
    REQUIRE(layers.backward_layer_kept(l, 0, layer_in, outs[static_cast<size_t>(l)].data(), d.data(), batch, p, g,
                                       l == 0 ? nullptr : din.data())
                .ok());
    d.swap(din);
  }
  CHECK(troupe::testing::relative_difference(grads, low) < 1e-6);
}
