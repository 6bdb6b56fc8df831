// `troupe generate --model FILE (--prompt-ids 1,2,3 | --prompt TEXT) [--tokens N] [--temperature T]
// [--top-k K] [--seed S]`: a saved gpt continues a prompt (models/gpt/gpt_generate.h). --prompt
// takes the text's bytes as ids (a byte-level model: vocab 256); the output is the ids, or with
// --prompt the text, prompt included.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "models/gpt/gpt_generate.h"

namespace troupe::cli {

Runner add_generate_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("generate", "Continue a prompt with a saved gpt (key/value cache, sampling)");
  auto o = std::make_shared<models::GenerateOptions>();
  auto text = std::make_shared<std::string>();
  cmd->add_option("--model", o->model, "The gpt's .safetensors file (troupe train --model gpt --save)")->required();
  auto* ids = cmd->add_option("--prompt-ids", o->prompt, "The prompt as token ids, comma-separated")->delimiter(',');
  cmd->add_option("--prompt", *text, "The prompt as text: its bytes are the ids (a byte-level model)")->excludes(ids);
  cmd->add_option("--tokens", o->tokens, "Tokens to generate")->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (0: the most likely token)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "Sample among the k most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the sampling")->capture_default_str();
  return [o, text]() {
    const bool bytes = !text->empty();
    if (bytes) {
      o->prompt.clear();
      o->prompt_flag = "--prompt";
      for (unsigned char ch : *text) o->prompt.push_back(ch);
    }
    auto r = models::generate(*o);
    if (!r.ok()) return report_error("generate", r.status());
    if (bytes) {
      std::string out;
      for (int32_t id : r->ids) out.push_back(static_cast<char>(id));
      std::printf("%s\n", out.c_str());
    } else {
      for (size_t i = 0; i < r->ids.size(); ++i) std::printf("%s%d", i ? "," : "", r->ids[i]);
      std::printf("\n");
    }
    return 0;
  };
}

}  // namespace troupe::cli
