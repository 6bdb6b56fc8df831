// The whole GPT (models/gpt/gpt_model.cc) against finite differences: every element of every block
// (embeddings, each block's LayerNorms, attention and MLP, the final LayerNorm, the head, tied or
// not), central differences of the f32 forward with step 1e-2, accepted at
// |numeric - analytic| <= 3e-4 + 2e-2 |gradient| — above the forward's rounding (~1e-5 / 1e-2)
// and far below the gradient-sized errors a wrong transpose, a missing residual or a dropped
// term give. Parameters are drawn large (not the 0.02 of training) so the gradients are of order
// 0.01..1 and every term matters.
#include <catch2/catch.hpp>

#include <cmath>

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
