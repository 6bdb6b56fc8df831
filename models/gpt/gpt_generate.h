// `troupe generate`: a saved gpt (--save) continues a prompt of token ids, one token at a time
// through the key/value cache (gpt_decoder.h), sampling each from the softmax of its logits over
// the temperature, among the top-k (temperature 0: the arg-max).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::models {

struct GenerateOptions {
  std::string model;             // a .safetensors file a gpt job saved
  std::vector<int32_t> prompt;   // token ids, at least one
  std::string prompt_flag = "--prompt-ids";  // how errors name the prompt (--prompt: text's bytes)
  int64_t tokens = 32;           // how many to generate (prompt + tokens <= the model's context)
  double temperature = 1.0;      // 0: greedy
  int64_t top_k = 0;             // 0: every token
  uint64_t seed = 1;
};

struct Generated {
  std::string model;             // "gpt L2 H2 D64 T64 V256"
  std::vector<int32_t> ids;      // the prompt, then the generated tokens
};

// invalid_argument naming the flag for a file that is not a gpt's, an empty prompt, a prompt id
// outside the vocabulary, or more tokens than the context holds; the file's own errors otherwise.
Expected<Generated> generate(const GenerateOptions& o);

}  // namespace troupe::models
