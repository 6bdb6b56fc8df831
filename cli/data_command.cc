// `troupe data inspect SPEC [--json]`: a dataset's schema (splits, fields with their type and
// per-example shape), counts, per-field min/max/mean/std and class balance, every file read to its
// end and checked; --stats-out FILE keeps the training split's mean and std for --normalize FILE.
// SPEC is what --data takes (data/dataset_spec.h).
// `troupe data tokenize --vocab N FILE... --out DIR`: a SentencePiece tokenizer trained on the text
// and the text as token shards with a dataset.yaml, for --data DIR --seq-len T (data/tokenize.h).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/durable_file.h"
#include "data/dataset_spec.h"
#include "data/inspect.h"
#include "data/tokenize.h"

namespace troupe::cli {

namespace {

// Adds `data tokenize`; its runner.
Runner add_tokenize(CLI::App* cmd) {
  auto* tok = cmd->add_subcommand("tokenize", "Train a SentencePiece tokenizer on text files and write them as token shards");
  auto files = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto options = std::make_shared<data::TokenizeOptions>();
  auto json = std::make_shared<bool>(false);
  tok->add_option("files", *files, "Text files (one sentence or line per line); names with train/val/test go to that split")
      ->required()->check(CLI::ExistingFile);
  tok->add_option("--vocab", options->training.vocab, "Pieces in the vocabulary, the special ones included")->required();
  tok->add_option("--out", *out, "Directory for tokenizer.model, the .bin shards and dataset.yaml")->required();
  tok->add_option("--model-type", options->training.model_type, "bpe, unigram, char or word")
      ->check(CLI::IsMember({"bpe", "unigram", "char", "word"}))->capture_default_str();
  tok->add_option("--val-fraction", options->val_fraction, "Move the last fraction of the training lines to val.bin")
      ->check(CLI::Range(0.0, 0.99));
  tok->add_flag("--byte-fallback", options->training.byte_fallback,
                "Unknown characters as their UTF-8 bytes (needs --vocab > 259)");
  tok->add_flag("--json", *json, "Print one JSON object");
  return [files, out, options, json]() {
    auto report = data::tokenize_files(*files, *options, *out);
    if (!report.ok()) return report_error("data tokenize", report.status());
    if (*json) {
      nlohmann::json j{{"vocab", report->vocab}, {"token_dtype", report->token_dtype}, {"tokenizer", report->model},
                       {"dataset", report->yaml}, {"tokens", report->tokens}, {"lines", report->lines}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("tokenizer %s: %d pieces; tokens as %s\n", report->model.c_str(), report->vocab,
                  report->token_dtype.c_str());
      for (const auto& [split, n] : report->tokens)
        std::printf("  %-6s %12zu tokens  %10zu lines\n", split.c_str(), n, report->lines.at(split));
      std::printf("train with: --data %s --seq-len T\n", out->c_str());
    }
    return 0;
  };
}

}  // namespace

Runner add_data_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("data", "Look at a dataset before training on it");
  cmd->require_subcommand(1);
  auto* inspect = cmd->add_subcommand("inspect", "Schema, counts, statistics and class balance of --data SPEC");
  auto spec = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto options = std::make_shared<data::SpecOptions>();
  inspect->add_option("spec", *spec, "A file, files a,b, a glob, a directory or a dataset.yaml")->required();
  inspect->add_option("--target", options->target, "CSV: the label column (default: label, labels, y, target, class or cls)");
  inspect->add_option("--token-dtype", options->token_dtype, "Raw .bin token files: u8, u16 or u32")
      ->check(CLI::IsMember({"u8", "u16", "u32"}))->capture_default_str();
  inspect->add_flag("--json", *json, "Print one JSON object");
  auto stats_out = std::make_shared<std::string>();
  inspect->add_option("--stats-out", *stats_out,
                      "Also write the training split's per-field mean and std here, for --normalize FILE");
  Runner tokenize = add_tokenize(cmd);
  return [inspect, tokenize, spec, json, options, stats_out]() {
    if (!inspect->parsed()) return tokenize();
    auto opened = data::open_dataset(*spec, *options);
    if (!opened.ok()) return report_error("data inspect", opened.status());
    const auto stats = data::inspect(*opened);
    if (!stats_out->empty()) {
      std::string split = opened->splits.count("train") ? "train" : "";
      if (split.empty() && opened->splits.size() == 1) split = opened->splits.begin()->first;
      if (split.empty())
        return report_error("data inspect", invalid_argument("--stats-out: " + *spec + " has no split named train"));
      const std::string text = data::normalization_stats(stats, split).dump(1) + "\n";
      Status st = write_file_durably(*stats_out, text, "normalization statistics");
      if (!st.ok()) return report_error("data inspect", st.with_context("--stats-out"));
    }
    if (*json) {
      std::printf("%s\n", data::to_json(stats, *opened).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::fputs(data::to_text(stats, *opened).c_str(), stdout);
    }
    return 0;
  };
}

}  // namespace troupe::cli
