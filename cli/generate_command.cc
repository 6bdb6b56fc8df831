// `troupe generate --model FILE (--prompt-ids 1,2,3 | --prompt TEXT [--tokenizer M]) [--tokens N]
// [--temperature T] [--top-k K] [--seed S]`: a saved gpt continues a prompt
// (models/gpt/gpt_generate.h). --prompt goes through the tokenizer the model was trained with
// (--tokenizer, or the one its training data's dataset.yaml names), or is taken as bytes by a
// byte-level model; the output is the ids, or with --prompt the text, prompt included.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "models/gpt/gpt_generate.h"

namespace troupe::cli {

Runner add_generate_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("generate", "Continue a prompt with a saved gpt (key/value cache, sampling)");
  auto o = std::make_shared<models::GenerateOptions>();
  cmd->add_option("--model", o->model, "The gpt's .safetensors file (troupe train --model gpt --save)")->required();
  auto* ids = cmd->add_option("--prompt-ids", o->prompt, "The prompt as token ids, comma-separated")->delimiter(',');
  cmd->add_option("--prompt", o->text, "The prompt as text: through the model's tokenizer (its bytes for a "
                                      "byte-level model); the output is text")->excludes(ids);
  cmd->add_option("--tokenizer", o->tokenizer, "A SentencePiece model (troupe data tokenize) for --prompt (default: "
                                               "the one the model's training data names)");
  cmd->add_option("--tokens", o->tokens, "Tokens to generate")->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (0: the most likely token)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Sample among the k most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the sampling")->capture_default_str();
  return [o]() {
    if (!o->text.empty()) o->prompt_flag = "--prompt";
    auto r = models::generate(*o);
    if (!r.ok()) return report_error("generate", r.status());
    if (!o->text.empty()) {
      std::printf("%s\n", r->text.c_str());
    } else {
      for (size_t i = 0; i < r->ids.size(); ++i) std::printf("%s%d", i ? "," : "", r->ids[i]);
      std::printf("\n");
    }
    return 0;
  };
}

}  // namespace troupe::cli
