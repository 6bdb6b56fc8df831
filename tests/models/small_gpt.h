// The tiny gpt the layer and gradient tests share: 2 blocks of 2 heads, dim 8, a context of 6 and a
// vocabulary of 7 — every term of every block matters at this size, and finite differences stay fast.
#pragma once

#include "models/gpt/gpt_config.h"

namespace troupe::testing {

inline models::GptConfig small_gpt(bool tie) {
  models::GptConfig c;
  c.layers = 2;
  c.heads = 2;
  c.dim = 8;
  c.context = 6;
  c.vocab = 7;
  c.tie = tie;
  return c;
}

}  // namespace troupe::testing
