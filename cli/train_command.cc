// `troupe train`: runs a training job in this process on the CPU or one GPU (the one-device strategy)
// and prints the test accuracy; with --json the last line of stdout is one JSON object.
// `--strategy pipeline --stages K [--workers N] [--microbatches M] [--schedule gpipe|1f1b]` runs a
// pipeline-parallel job in this process instead: one thread per stage actor over in-process
// transports (trainers/pipeline/local_pipeline.h), the same stages `troupe submit` runs on nodes;
// its --save writes the stages' parameters assembled.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "cli/train_flags.h"
#include "data/data_source.h"
#include "trainers/job/job_report.h"
#include "trainers/local/local_trainer.h"
#include "trainers/setup/model_file.h"
#include "trainers/pipeline/local_pipeline.h"
#include "trainers/pipeline/schedule.h"
#include "trainers/library/trainer_library.h"

namespace troupe::cli {

Runner add_train_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("train", "Train a model in this process on the CPU or one GPU");
  auto f = std::make_shared<TrainFlags>();
  auto device_flag = std::make_shared<std::string>("cpu");
  add_train_flags(cmd, *f, "Examples per step");
  cmd->add_option("--device", *device_flag, "cpu, cuda or cuda:N")->capture_default_str();
  auto strategy = std::make_shared<std::string>("local");
  auto po = std::make_shared<pipeline::PipelineOptions>();
  cmd->add_option("--strategy", *strategy, "local (one device) or pipeline (layers cut into --stages, threads)")
      ->check(CLI::IsMember({"local", "pipeline"}))->capture_default_str();
  cmd->add_option("--stages", po->stages, "pipeline: stages")->capture_default_str();
  cmd->add_option("--workers", po->workers, "pipeline: stage actors in all, a multiple of --stages (N/K replicas)");
  cmd->add_option("--microbatches", po->microbatches, "pipeline: micro-batches per step and replica")
      ->capture_default_str();
  cmd->add_option("--schedule", po->schedule, "pipeline: gpipe or 1f1b")->capture_default_str();
  cmd->add_option("--stage-layers", po->stage_layers, "pipeline: layers per stage, e.g. 2,1,1,1 (default: balanced)");

  return [f, device_flag, strategy, po, &global]() -> int {
    TrainOptions& o = f->options;
    if (!f->lib.empty()) {
      auto lib = load_trainer_library(f->lib);
      if (!lib.ok()) return report_error("train", lib.status().with_context("--lib"));
    }
    TROUPE_RETURN_IF_ERROR_CLI(finish_train_flags(*f), "train");
    auto device = parse_device(*device_flag);
    if (!device.ok()) return report_error("train", device.status().with_context("--device"));
    o.device = *device;
    const Config& cfg = global.config;
    o.cpu_threads = static_cast<int>(cfg.cpu_threads);
    o.loss_check_every = cfg.loss_check_every;
    o.cuda_graphs = cfg.cuda_graphs;
    o.tf32 = cfg.cuda_tf32;
    if (o.dataset_dir.empty()) o.dataset_dir = cfg.dataset_dir;
    Status valid = o.validate();
    if (!valid.ok()) return report_error("train", valid);

    ProgressBar bar(cfg.progress && !f->no_progress, cfg.progress_interval_ms);
    auto on_progress = [&bar](const TrainProgress& p) { draw_progress(bar, p); };
    Expected<TrainResult> result = internal_error("not run");
    std::vector<pipeline::StageReport> stages;
    if (*strategy == "pipeline") {
      if (!o.device.is_cpu()) return report_error("train", invalid_argument("--strategy pipeline trains on the CPU"));
      if (o.precision != DType::f32)
        return report_error("train", invalid_argument("--precision: pipeline stages compute in f32 for now"));
      if (!o.save_path.empty()) TROUPE_RETURN_IF_ERROR_CLI(check_save_target(o.save_path), "train");
      auto data = load_train_data(o);
      if (!data.ok()) return report_error("train", data.status());
      auto run = pipeline::train_local_pipeline(o, *po, *data->train, *data->test, on_progress);
      if (run.ok()) {
        result = run->train;
        stages = run->stages;
        if (!o.save_path.empty()) {  // --save: the stages' parameters, assembled, under the trainer's blocks
          Status saved = save_trained_model(o, *data->train, run->params, run->train);
          if (!saved.ok()) result = saved;
        }
      } else {
        result = run.status();
      }
    } else {
      result = train_local(o, on_progress);
    }
    bar.finish();
    if (!result.ok()) return report_error("train", result.status());
    const TrainResult& r = *result;
    std::printf("model %s on %s: %d epochs, %lld steps\n", r.model.c_str(), r.device.c_str(), r.epochs,
                static_cast<long long>(r.steps));
    if (r.test_accuracy >= 0)
      std::printf("test accuracy %.4f, final loss %.4f, %s samples/s, %.1f s\n", r.test_accuracy, r.final_loss,
                  format_count(r.samples_per_second).c_str(), r.wall_seconds);
    else  // a model that does not classify (a regression): its test loss
      std::printf("test loss %.6g, final loss %.6g, %s samples/s, %.1f s\n", r.test_loss, r.final_loss,
                  format_count(r.samples_per_second).c_str(), r.wall_seconds);
    if (r.precision != "f32") {
      std::printf("precision %s (f32 master weights)", r.precision.c_str());
      if (r.loss_scale > 0)
        std::printf(": %lld steps skipped on overflow, loss scale %g at the end", static_cast<long long>(r.overflow_steps),
                    r.loss_scale);
      std::printf("\n");
    }
    for (const pipeline::StageReport& st : stages)
      std::printf("stage %d: layers [%d, %d), %.2f MiB params+grads+optimizer (%.3f of the model), bubble %.3f "
                  "(GPipe estimate %.3f)\n", st.stage, st.first_layer, st.end_layer,
                  (st.param_bytes + st.grad_bytes + st.optimizer_bytes) / 1048576.0, st.memory_fraction(),
                  st.bubble_fraction, pipeline::gpipe_bubble_estimate(po->stages, po->microbatches));
    if (f->json) std::printf("%s\n", job::train_result_json(r).dump().c_str());
    return 0;
  };
}

}  // namespace troupe::cli
