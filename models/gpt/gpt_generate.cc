#include "models/gpt/gpt_generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "data/safetensors.h"
#include "models/gpt/gpt_decoder.h"
#include "trainers/model_file.h"

namespace troupe::models {

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
  if (o.prompt.empty()) return invalid_argument(o.prompt_flag + ": give at least one token id");
  for (int32_t id : o.prompt)
    if (id < 0 || id >= config->vocab)
      return invalid_argument(o.prompt_flag + ": id " + std::to_string(id) + " is outside the model's vocabulary of " +
                              std::to_string(config->vocab) + " tokens");
  if (static_cast<int64_t>(o.prompt.size()) + o.tokens > config->context)
    return invalid_argument("--tokens " + std::to_string(o.tokens) + " after a prompt of " +
                            std::to_string(o.prompt.size()) + " exceed the model's context of " +
                            std::to_string(config->context) + " positions");
  if (o.temperature < 0 || o.top_k < 0) return invalid_argument("--temperature and --top-k must be >= 0");
  GptModel model(*config);
  ParameterSpace space;
  model.declare(space);
  std::vector<float> params(space.size());
  TROUPE_RETURN_IF_ERROR(load_model_into(o.model, space, "gpt", false, params.data()).with_context("--model"));
  const Parameters p(params.data(), params.size());
  GptDecoder decoder(model);
  Generated out{"gpt " + config->describe(), o.prompt};
  std::mt19937_64 rng(o.seed);
  std::vector<double> probs(static_cast<size_t>(config->vocab));
  std::vector<int32_t> order(probs.size());
  const float* logits = nullptr;
  for (int32_t id : o.prompt) {
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
  return out;
}

}  // namespace troupe::models
