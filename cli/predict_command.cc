// `troupe predict --model FILE --data SPEC --out FILE.npy`: a saved model run over a dataset in
// this process (trainers/predict/predict.h), its outputs written as an .npy in the data's order, with a
// progress bar and a summary (rows/s; the accuracy, or the mean squared error, when the data holds
// the target); --json prints one JSON object. With --workers N the same runs on the cluster as a job
// of N predictor actors (cli/predict_job.h): --detach, troupe status/logs/stop as for training jobs.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/predict_job.h"
#include "cli/progress_bar.h"
#include "trainers/predict/predict.h"
#include "trainers/library/trainer_library.h"

namespace troupe::cli {

Runner add_predict_command(CLI::App& app, GlobalOptions& global) {
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
  auto job = std::make_shared<PredictJobFlags>();
  auto* workers = cmd->add_option("--workers", job->spec.workers,
                                  "Run on the cluster (troupe up) as a job of N predictor actors, each taking shards "
                                  "of the rows from the ledger; the output is the same");
  cmd->add_option("--cpus-per-worker", job->spec.cpus_per_worker, "--workers: CPUs each predictor needs")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--shard-rows", job->spec.shard_rows,
                  "--workers: rows per shard, a multiple of --batch-size (default: about 8 shards per predictor)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-restarts", job->spec.max_restarts, "--workers: replacements of failed predictors before the job fails")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_option("--restart-backoff", job->spec.restart_backoff_ms, "--workers: milliseconds before a replacement")
      ->check(CLI::Range(int64_t{0}, int64_t{600000}))->capture_default_str();
  cmd->add_option("--name", job->spec.name, "--workers: a name for the job (shown by troupe status)");
  cmd->add_flag("--detach", job->detach, "--workers: print the job id and return at once");
  cmd->add_option("--pending-timeout", job->pending_timeout, "--workers: seconds to wait for a PENDING job to start")
      ->check(CLI::PositiveNumber)->capture_default_str();
  return [o, json, no_progress, lib, job, workers, &global]() {
    if (workers->count() > 0) {
      if (job->spec.workers < 1)
        return report_error("predict", invalid_argument("--workers " + std::to_string(job->spec.workers) +
                                                        ": a prediction job needs at least 1 predictor (leave "
                                                        "--workers out to predict in this process)"));
      if (!lib->empty())
        return report_error("predict", invalid_argument("--lib with --workers: prediction jobs run the built-in "
                                                        "trainers for now; predict a --lib model in this process"));
      job->spec.predict = *o;
      job->json = *json;
      job->no_progress = *no_progress;
      return run_predict_job(*job, global);
    }
    if (job->detach) return report_error("predict", invalid_argument("--detach needs --workers N (a job on the cluster)"));
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
      if (r->loss >= 0) j["loss"] = r->loss;
      if (!r->note.empty()) j["note"] = r->note;
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return 0;
    }
    std::printf("%s: %lld rows x %lld outputs into %s, %s rows/s, %.2f s\n", r->model.c_str(),
                static_cast<long long>(r->rows), static_cast<long long>(r->outputs), out.c_str(),
                format_count(r->rows_per_second).c_str(), r->seconds);
    if (r->accuracy >= 0) std::printf("accuracy %.4f\n", r->accuracy);
    if (r->mse >= 0) std::printf("mean squared error %.6g\n", r->mse);
    if (r->loss >= 0)
      std::printf("next-token loss %.4f nats per token (perplexity %.3f)\n", r->loss, std::exp(r->loss));
    if (!r->note.empty()) std::printf("note: %s\n", r->note.c_str());
    return 0;
  };
}

}  // namespace troupe::cli
