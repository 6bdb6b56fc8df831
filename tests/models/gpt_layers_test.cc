// The gpt's layers (models/gpt/gpt_layers.h) keeping activations from a training forward for its
// backward (LayerModel::forward_layer_kept / backward_layer_kept, trainer ABI 6): the same
// gradients and input gradients, bit for bit, as the stateless pair that computes each layer's
// forward again — with two micro-batches in flight in different slots, their backwards taken in
// either order — and a slot outside the range refused.
#include <catch2/catch.hpp>

#include <vector>

#include "models/gpt/gpt_layers.h"
#include "tests/models/small_gpt.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;
using troupe::models::GptLayers;
using troupe::models::GptModel;
using troupe::testing::random_floats;

namespace {

struct Pass {  // one micro-batch through every layer, forward then backward
  std::vector<std::vector<float>> outs;
  std::vector<float> grads, d_first_block;  // every block's gradient; d loss / d (layer 1's input)
};

}  // namespace

TEST_CASE("gpt layers: kept activations give the stateless backward's gradients, two slots in flight",
          "[models][gpt][layers]") {
  GptModel model(troupe::testing::small_gpt(false));
  ParameterSpace space;
  model.declare(space);
  REQUIRE(space.status().ok());
  const int64_t rows = 2, seq = 5, dim = 8, vocab = 7;
  GptLayers layers(model, seq);
  const std::vector<LayerInfo> info = layers.layer_infos();
  REQUIRE(info.size() == 4);  // embed, h0, h1, head
  const std::vector<float> params = random_floats(space.size(), 5, -0.3f, 0.3f);
  const Parameters p(const_cast<float*>(params.data()), params.size());
  const std::vector<float> ids_a{0, 3, 6, 2, 2, 5, 1, 4, 0, 6}, ids_b{1, 1, 2, 3, 5, 6, 0, 0, 4, 2};
  const std::vector<int32_t> labels_a{3, 6, 2, 2, 1, 1, 4, 0, 6, 5}, labels_b{1, 2, 3, 5, 6, 0, 0, 4, 2, 2};
  const int count = static_cast<int>(info.size());

  auto forward = [&](const std::vector<float>& ids, int slot, Pass& pass) {
    pass.outs.assign(info.size(), {});
    const float* in = ids.data();
    for (int l = 0; l < count; ++l) {
      pass.outs[l].resize(static_cast<size_t>(rows * info[l].out_features));
      const Status s = slot < 0 ? layers.forward_layer(l, in, rows, p, pass.outs[l].data())
                                : layers.forward_layer_kept(l, slot, in, rows, p, pass.outs[l].data());
      REQUIRE(s.ok());
      in = pass.outs[l].data();
    }
  };
  auto backward = [&](const std::vector<float>& ids, const std::vector<int32_t>& labels, int slot, Pass& pass) {
    std::vector<float> d(static_cast<size_t>(rows * seq * vocab)), din;
    REQUIRE(layers.output_loss(pass.outs.back().data(), labels.data(), rows, d.data()).ok());
    pass.grads.assign(space.size(), 0.0f);
    Gradients g(pass.grads.data(), pass.grads.size());
    for (int l = count - 1; l >= 0; --l) {
      const float* in = l == 0 ? ids.data() : pass.outs[l - 1].data();
      din.assign(l == 0 ? 0 : static_cast<size_t>(rows * seq * dim), 0.0f);
      const Status s = slot < 0 ? layers.backward_layer(l, in, pass.outs[l].data(), d.data(), rows, p, g,
                                                        l == 0 ? nullptr : din.data())
                                : layers.backward_layer_kept(l, slot, in, pass.outs[l].data(), d.data(), rows, p, g,
                                                             l == 0 ? nullptr : din.data());
      REQUIRE(s.ok());
      if (l == 1) pass.d_first_block = din;
      d.swap(din);
    }
  };

  Pass want_a, want_b;
  forward(ids_a, -1, want_a);
  backward(ids_a, labels_a, -1, want_a);
  forward(ids_b, -1, want_b);
  backward(ids_b, labels_b, -1, want_b);
  REQUIRE(want_a.grads != want_b.grads);  // the two micro-batches are told apart

  const bool b_first = GENERATE(false, true);
  INFO((b_first ? "slot 1's backward first" : "slot 0's backward first"));
  Pass a, b;
  forward(ids_a, 0, a);
  forward(ids_b, 1, b);
  if (b_first) backward(ids_b, labels_b, 1, b);
  backward(ids_a, labels_a, 0, a);
  if (!b_first) backward(ids_b, labels_b, 1, b);
  CHECK(a.outs == want_a.outs);
  CHECK(a.grads == want_a.grads);
  CHECK(a.d_first_block == want_a.d_first_block);
  CHECK(b.grads == want_b.grads);
  CHECK(b.d_first_block == want_b.d_first_block);

  // A stateless forward between a kept forward and its backward changes nothing kept.
  Pass c;
  forward(ids_a, 0, c);
  Pass other;
  forward(ids_b, -1, other);
  backward(ids_a, labels_a, 0, c);
  CHECK(c.grads == want_a.grads);

  std::vector<float> out(static_cast<size_t>(rows * seq * dim));
  const Status bad = layers.forward_layer_kept(0, LayerModel::kKeptSlots, ids_a.data(), rows, p, out.data());
  CHECK(bad.code() == Code::invalid_argument);
  CHECK(bad.message().find("activation slot 64") != std::string::npos);
}
