// `troupe generate`: a saved gpt (--save) continues a prompt of token ids, one token at a time
// through the key/value cache (gpt_decoder.h), sampling each from the softmax of its logits over
// the temperature, among the top-k (temperature 0: the arg-max). A text prompt goes through the
// tokenizer the model was trained with (data/tokenizer.h; found through its training data's
// dataset.yaml unless named), and the continuation comes back as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::models {

struct GenerateOptions {
  std::string model;             // a .safetensors file a gpt job saved
  std::vector<int32_t> prompt;   // token ids, at least one (or the text below)
  std::string prompt_flag = "--prompt-ids";  // how errors name the prompt
  // The prompt as text (instead of ids): encoded with the tokenizer, lines ended by its
  // end-of-line id but the last; with no tokenizer, its bytes are the ids (a byte-level model).
  std::string text;
  // A SentencePiece model (troupe data tokenize). Empty: the one the dataset.yaml of the model's
  // training data names (its troupe.data), if any; else none.
  std::string tokenizer;
  int64_t tokens = 32;           // how many to generate (prompt + tokens <= the model's context)
  double temperature = 1.0;      // 0: greedy
  int64_t top_k = 0;             // 0: every token
  uint64_t seed = 1;
};

struct Generated {
  std::string model;             // "gpt L2 H2 D64 T64 V256"
  std::vector<int32_t> ids;      // the prompt, then the generated tokens
  std::string tokenizer;         // the tokenizer the text went through ("" none: bytes, or ids)
  std::string text;              // with a text prompt: the ids decoded (the prompt included)
};

// invalid_argument naming the flag for a file that is not a gpt's, an empty prompt, a prompt id
// outside the vocabulary, more tokens than the context holds, or a tokenizer with more pieces than
// the model has tokens (not the one it was trained with); the files' own errors otherwise.
Expected<Generated> generate(const GenerateOptions& o);

}  // namespace troupe::models
