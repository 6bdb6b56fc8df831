#include "models/gpt/gpt_generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <numeric>
#include <random>

#include "data/dataset_spec.h"
#include "data/safetensors.h"
#include "data/tokenizer.h"
#include "models/gpt/gpt_decoder.h"
#include "trainers/setup/model_file.h"

namespace troupe::models {
namespace {

// The tokenizer a text prompt goes through: --tokenizer, else the one the model's training data
// names; none (nullopt) when neither, and the model must then read bytes (trained on text:FILE, or
// a vocabulary of 256 or more). A tokenizer with more pieces than the model has tokens is not the
// one it was trained with.
Expected<std::optional<data::Tokenizer>> text_tokenizer(const GenerateOptions& o,
                                                        const std::map<std::string, std::string>& metadata,
                                                        int64_t vocab) {
  std::string path = o.tokenizer, from = "--tokenizer";
  auto trained_on = metadata.find("troupe.data");
  const std::string data = trained_on == metadata.end() ? std::string() : trained_on->second;
  if (path.empty() && !data.empty()) {
    auto named = data::tokenizer_of(data);
    if (named.ok() && !named->empty() && std::filesystem::exists(*named)) {
      path = *named;
      from = "the tokenizer of the model's training data (" + data + ")";
    }
  }
  if (path.empty()) {
    if (vocab < 256 && data.rfind("text:", 0) != 0)  // a byte-level model reads bytes, whatever its vocabulary
      return invalid_argument(o.prompt_flag + ": the model's vocabulary has " + std::to_string(vocab) +
                              " tokens, so its ids are not bytes, and no tokenizer was found (its training data names "
                              "none): give --tokenizer FILE.model, or the prompt as --prompt-ids");
    return std::optional<data::Tokenizer>();
  }
  auto t = data::Tokenizer::load(path);
  if (!t.ok()) return t.status().with_context(from);
  if (t->vocab() > vocab)
    return invalid_argument(from + ": " + path + " has " + std::to_string(t->vocab()) + " pieces but the model's "
                            "vocabulary is " + std::to_string(vocab) + " tokens: not the tokenizer it was trained with");
  return std::optional<data::Tokenizer>(std::move(*t));
}

// The text's lines encoded, each but the last ended by the end-of-line id (as troupe data
// tokenize wrote the training data).
Expected<std::vector<int32_t>> encode_prompt(const data::Tokenizer& t, const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (true) {
    const size_t nl = text.find('\n', at);
    auto line = t.encode(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (!line.ok()) return line.status();
    ids.insert(ids.end(), line->begin(), line->end());
    if (nl == std::string::npos) break;
    ids.push_back(t.end_of_line());
    at = nl + 1;
  }
  return ids;
}

Expected<std::vector<int32_t>> byte_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (unsigned char ch : text) ids.push_back(ch);
  return ids;
}

}  // namespace

Expected<Generated> generate(const GenerateOptions& o) {
  auto file = data::read_safetensors(o.model);
  if (!file.ok()) return file.status().with_context("--model");
  auto trainer = file->metadata.find(kModelTrainer);
  auto described = file->metadata.find("troupe.description");
  if (trainer == file->metadata.end() || trainer->second != "gpt" || described == file->metadata.end())
    return invalid_argument("--model " + o.model + " is not a gpt's model file (troupe.trainer: " +
                            (trainer == file->metadata.end() ? std::string("none") : trainer->second) + ")");
  auto config = GptConfig::parse(described->second);
  if (!config.ok()) return config.status().with_context("--model " + o.model);
  std::optional<data::Tokenizer> tokenizer;
  std::vector<int32_t> prompt = o.prompt;
  if (!o.text.empty()) {
    auto t = text_tokenizer(o, file->metadata, config->vocab);
    if (!t.ok()) return t.status();
    tokenizer = std::move(*t);
    auto ids = tokenizer ? encode_prompt(*tokenizer, o.text) : byte_ids(o.text);
    if (!ids.ok()) return ids.status().with_context(o.prompt_flag);
    prompt = std::move(*ids);
  }
  if (prompt.empty()) return invalid_argument(o.prompt_flag + ": give at least one token id");
  for (int32_t id : prompt)
    if (id < 0 || id >= config->vocab)
      return invalid_argument(o.prompt_flag + ": id " + std::to_string(id) + " is outside the model's vocabulary of " +
                              std::to_string(config->vocab) + " tokens");
  if (static_cast<int64_t>(prompt.size()) + o.tokens > config->context)
    return invalid_argument("--tokens " + std::to_string(o.tokens) + " after a prompt of " +
                            std::to_string(prompt.size()) + " exceed the model's context of " +
                            std::to_string(config->context) + " positions");
  if (o.temperature < 0 || o.top_k < 0) return invalid_argument("--temperature and --top-k must be >= 0");
  GptModel model(*config);
  ParameterSpace space;
  model.declare(space);
  std::vector<float> params(space.size());
  TROUPE_RETURN_IF_ERROR(load_model_into(o.model, space, "gpt", false, params.data()).with_context("--model"));
  const Parameters p(params.data(), params.size());
  GptDecoder decoder(model);
  Generated out{"gpt " + config->describe(), prompt, tokenizer ? tokenizer->path() : std::string(), ""};
  std::mt19937_64 rng(o.seed);
  std::vector<double> probs(static_cast<size_t>(config->vocab));
  std::vector<int32_t> order(probs.size());
  const float* logits = nullptr;
  for (int32_t id : prompt) {
    auto l = decoder.step(id, p);
    if (!l.ok()) return l.status();
    logits = *l;
  }
  for (int64_t n = 0; n < o.tokens; ++n) {
    int32_t next = 0;
    if (o.temperature == 0) {
      next = static_cast<int32_t>(std::max_element(logits, logits + config->vocab) - logits);
    } else {
      std::iota(order.begin(), order.end(), 0);
      const int64_t k = o.top_k > 0 ? std::min(o.top_k, config->vocab) : config->vocab;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      std::fill(probs.begin(), probs.end(), 0.0);
      const double top = logits[order[0]];
      for (int64_t i = 0; i < k; ++i) probs[order[i]] = std::exp((logits[order[i]] - top) / o.temperature);
      next = static_cast<int32_t>(std::discrete_distribution<int32_t>(probs.begin(), probs.end())(rng));
    }
    out.ids.push_back(next);
    if (n + 1 == o.tokens) break;
    auto l = decoder.step(next, p);
    if (!l.ok()) return l.status();
    logits = *l;
  }
  if (!o.text.empty()) {
    if (tokenizer) {
      auto text = tokenizer->decode(std::vector<int>(out.ids.begin(), out.ids.end()));
      if (!text.ok()) return text.status().with_context("decoding the generated ids with " + tokenizer->path());
      out.text = std::move(*text);
    } else {
      for (int32_t id : out.ids) out.text.push_back(static_cast<char>(id));
    }
  }
  return out;
}

}  // namespace troupe::models
