// Generation's key/value cache (models/gpt/gpt_decoder.h): the logits of every position, fed one
// token at a time, equal the full forward's over the whole context (the same sums in another
// order: within 1e-4 of logits of order 1), tied and untied; a full context and an id outside the
// vocabulary are refused naming them.
#include <catch2/catch.hpp>

#include "models/gpt/gpt_decoder.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;
using troupe::models::GptConfig;
using troupe::models::GptDecoder;
using troupe::models::GptModel;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

TEST_CASE("the cached decoder's logits equal recomputing the whole context", "[models][gpt][generate]") {
  GptConfig c;
  c.layers = 2;
  c.heads = 2;
  c.dim = 16;
  c.context = 12;
  c.vocab = 11;
  c.tie = GENERATE(false, true);
  GptModel model(c);
  ParameterSpace space;
  model.declare(space);
  std::vector<float> params = random_floats(space.size(), 4, -0.4f, 0.4f);
  const Parameters p(params.data(), params.size());
  const std::vector<int32_t> tokens{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  REQUIRE(model.forward(tokens, nullptr, 1, c.context, p).ok());
  const std::vector<float> full(model.logits(), model.logits() + c.context * c.vocab);
  double spread = 0;
  for (float v : full) spread = std::max(spread, std::fabs(double(v)));
  REQUIRE(spread > 0.5);  // logits of some size: the comparison means something
  GptDecoder decoder(model);
  for (int64_t t = 0; t < c.context; ++t) {
    auto logits = decoder.step(tokens[t], p);
    REQUIRE(logits.ok());
    INFO("position " << t);
    REQUIRE(first_difference(*logits, full.data() + t * c.vocab, static_cast<size_t>(c.vocab), 1e-4, 1e-4) == "");
  }
  auto full_context = decoder.step(1, p);
  REQUIRE_FALSE(full_context.ok());
  CHECK(full_context.status().message().find("the context is full: the model has 12 positions") != std::string::npos);
  decoder.reset();
  auto bad = decoder.step(11, p);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("token id 11 is outside the model's vocabulary of 11") != std::string::npos);
}
