#include "models/gpt/gpt_config.h"

#include <cstdio>

namespace troupe::models {

std::string GptConfig::describe() const {
  return "L" + std::to_string(layers) + " H" + std::to_string(heads) + " D" + std::to_string(dim) + " T" +
         std::to_string(context) + " V" + std::to_string(vocab) + (tie ? " tied" : "");
}

Expected<GptConfig> GptConfig::from(const JobConfig& config, int64_t seq_len, int64_t data_vocab) {
  GptConfig c;
  auto get = [&](const char* key, int64_t fallback, int64_t lo, int64_t hi, int64_t* out) -> Status {
    auto v = config.get_int(key, fallback);
    if (!v.ok()) return v.status();
    if (*v < lo || *v > hi)
      return invalid_argument("--trainer-arg " + std::string(key) + "=" + std::to_string(*v) + " must be in [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = *v;
    return {};
  };
  TROUPE_RETURN_IF_ERROR(get("layers", 2, 1, 256, &c.layers));
  TROUPE_RETURN_IF_ERROR(get("heads", 2, 1, 256, &c.heads));
  TROUPE_RETURN_IF_ERROR(get("dim", 64, 1, 1 << 16, &c.dim));
  if (c.dim % c.heads != 0)
    return invalid_argument("--trainer-arg heads=" + std::to_string(c.heads) + " does not divide dim=" +
                            std::to_string(c.dim) + "; pick heads that divide the model's width");
  if (seq_len <= 0)
    return invalid_argument("the gpt trains on token windows: give --seq-len (the context) with a token stream");
  TROUPE_RETURN_IF_ERROR(get("context", seq_len, 1, 1 << 20, &c.context));
  if (seq_len > c.context)
    return invalid_argument("--seq-len " + std::to_string(seq_len) + " is longer than the model's context of " +
                            std::to_string(c.context) + " positions (--trainer-arg context); lower --seq-len or "
                            "raise context");
  TROUPE_RETURN_IF_ERROR(get("vocab", data_vocab, 2, 1 << 24, &c.vocab));
  if (c.vocab < data_vocab)
    return invalid_argument("the data's token ids reach " + std::to_string(data_vocab - 1) +
                            ", outside --trainer-arg vocab=" + std::to_string(c.vocab) + "; raise vocab to at least " +
                            std::to_string(data_vocab) + " or leave it out (the data's vocabulary)");
  int64_t tie = 0;
  TROUPE_RETURN_IF_ERROR(get("tie", 0, 0, 1, &tie));
  c.tie = tie == 1;
  for (const auto& kv : config.values()) {
    static const char* known[] = {"layers", "heads", "dim", "context", "vocab", "tie", "hidden"};
    bool ok = false;
    for (const char* k : known) ok = ok || kv.first == k;
    if (!ok)
      return invalid_argument("--trainer-arg " + kv.first + ": the gpt knows layers, heads, dim, context, vocab, tie");
  }
  return c;
}

Expected<GptConfig> GptConfig::parse(const std::string& description) {
  GptConfig c;
  long long l = 0, h = 0, d = 0, t = 0, v = 0;
  char tied[8] = {};
  // A saved model's description starts with the trainer's name: "gpt L2 H2 ...".
  const char* text = description.c_str() + (description.rfind("gpt ", 0) == 0 ? 4 : 0);
  const int got = std::sscanf(text, "L%lld H%lld D%lld T%lld V%lld %7s", &l, &h, &d, &t, &v, tied);
  if (got < 5 || l < 1 || h < 1 || d < 1 || d % h != 0 || t < 1 || v < 2 || (got == 6 && std::string(tied) != "tied"))
    return invalid_argument("'" + description + "' is not a gpt configuration (\"L2 H2 D64 T32 V16 [tied]\")");
  c.layers = l, c.heads = h, c.dim = d, c.context = t, c.vocab = v, c.tie = got == 6;
  return c;
}

}  // namespace troupe::models
