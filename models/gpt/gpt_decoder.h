// Generation with the GPT: one token at a time, each position's keys and values kept in a cache so
// a new token costs one position's work (no recomputing the context). The logits it gives for
// position t equal the full forward's (GptModel::forward) at t, up to rounding (tested).
//
//   GptDecoder dec(model);                     // a GptModel after declare(), which it must outlive
//   for (int32_t id : prompt) logits = dec.step(id, params);   // then sample, step the sample...
#pragma once

#include <cstdint>
#include <vector>

#include "models/gpt/gpt_model.h"

namespace troupe::models {

class GptDecoder {
 public:
  explicit GptDecoder(const GptModel& model);

  // Feeds the next token (at position positions()) and returns the next token's logits [vocab],
  // valid until the next call. invalid_argument for an id outside the vocabulary or a full context
  // (positions() == context: the cache holds no more), naming it.
  Expected<const float*> step(int32_t token, const Parameters& params);
  int64_t positions() const { return pos_; }
  void reset() { pos_ = 0; }

 private:
  const GptModel& model_;
  const GptModel::Params p_;
  int64_t pos_ = 0;
  std::vector<std::vector<float>> keys_, values_;  // per layer [context x dim]
  std::vector<float> h_, ln_, qkv_, att_, fc_, logits_, scores_, mean_, rstd_;
};

}  // namespace troupe::models
