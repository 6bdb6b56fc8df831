// `troupe predict --model FILE --data SPEC --out FILE.npy`: a saved model run over a dataset in
// this process (trainers/predict.h), its outputs written as an .npy in the data's order, with a
// progress bar and a summary (rows/s; the accuracy, or the mean squared error, when the data holds
// the target); --json prints one JSON object.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "trainers/predict.h"
#include "trainers/trainer_library.h"

namespace troupe::cli {

Runner add_predict_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("predict", "Run a saved model over a dataset; its outputs into an .npy file");
  auto o = std::make_shared<PredictOptions>();
  auto json = std::make_shared<bool>(false);
  auto no_progress = std::make_shared<bool>(false);
  auto lib = std::make_shared<std::string>();
  cmd->add_option("--model", o->model, "The model: a .safetensors file troupe saved (--save, troupe export)")->required();
  cmd->add_option("--data", o->data, "The examples: what --data takes for training (a file, a,b, a glob, a directory, a dataset.yaml)")
      ->required();
  cmd->add_option("--out", o->out, "Where the outputs go: an f32 .npy of [rows, outputs] in the data's order")->required();
  cmd->add_option("--split", o->split, "Which split of the data (default: its only one, else test)");
  cmd->add_option("--inputs", o->inputs, "The input fields (default: those the model was trained on)")->delimiter(',');
  cmd->add_option("--target", o->target, "The target field to score against (default: the model's, if the data has it)");
  cmd->add_option("--token-dtype", o->token_dtype, "Raw .bin token files: u8, u16 or u32")
      ->check(CLI::IsMember({"u8", "u16", "u32"}))->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Rows per predict() call")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--lib", *lib, "Trainer library (.so) of a user's trainer to load first");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_flag("--no-progress", *no_progress, "No progress bar");
  return [o, json, no_progress, lib]() {
    if (!lib->empty()) {
      auto loaded = load_trainer_library(*lib);
      if (!loaded.ok()) return report_error("predict", loaded.status().with_context("--lib"));
    }
    ProgressBar bar(!*json && !*no_progress, 200);
    auto r = predict_local(*o, [&](int64_t done, int64_t total) {
      bar.update("predict", done, total, format_count(static_cast<double>(done)) + " rows");
    });
    bar.finish();
    if (!r.ok()) return report_error("predict", r.status());
    const std::string out = std::filesystem::absolute(o->out).string();
    if (*json) {
      nlohmann::json j{{"model", r->model}, {"rows", r->rows}, {"outputs", r->outputs}, {"out", out},
                       {"seconds", r->seconds}, {"rows_per_second", r->rows_per_second}};
      if (r->accuracy >= 0) j["accuracy"] = r->accuracy;
      if (r->mse >= 0) j["mse"] = r->mse;
      if (!r->note.empty()) j["note"] = r->note;
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return 0;
    }
    std::printf("%s: %lld rows x %lld outputs into %s, %s rows/s, %.2f s\n", r->model.c_str(),
                static_cast<long long>(r->rows), static_cast<long long>(r->outputs), out.c_str(),
                format_count(r->rows_per_second).c_str(), r->seconds);
    if (r->accuracy >= 0) std::printf("accuracy %.4f\n", r->accuracy);
    if (r->mse >= 0) std::printf("mean squared error %.6g\n", r->mse);
    if (!r->note.empty()) std::printf("note: %s\n", r->note.c_str());
    return 0;
  };
}

}  // namespace troupe::cli
