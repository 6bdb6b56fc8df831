#include "cli/train_flags.h"

#include "data/dataset_spec.h"
#include "trainers/setup/model_args.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

namespace troupe::cli {
namespace {

// "256,128" -> {256, 128}; "" -> {} (no hidden layer).
Expected<std::vector<int>> parse_sizes(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0 || v > 65536) {
      return invalid_argument("--hidden '" + text + "': '" + item +
                              "' is not a layer size in [1, 65536]; use a comma-separated list like 256,128");
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace

void add_train_flags(CLI::App* cmd, TrainFlags& f, const std::string& batch_help) {
  TrainOptions& o = f.options;
  cmd->add_option("--model,--trainer", o.model,
                  "Registered trainer to train: mlp, cnn, gpt, torchscript:FILE (a module saved from Python), or one "
                  "of --lib's")
      ->capture_default_str();
  cmd->add_option("--lib", f.lib, "Trainer library (.so built against this troupe) to load first");
  cmd->add_option("--trainer-arg", o.trainer_args, "Setting for the trainer, key=value (repeatable)");
  cmd->add_option("--hidden", f.hidden, "Hidden layer sizes, comma-separated")->capture_default_str();
  auto* dataset = cmd->add_option("--dataset", o.dataset, "Built-in dataset")
                      ->check(CLI::IsMember({"fashion-mnist"}))->capture_default_str();
  cmd->add_option("--dataset-dir", o.dataset_dir, "Directory of the dataset's files (default: setting dataset_dir)");
  cmd->add_option("--data", o.data,
                  "Your own data: a .npy/.npz/.csv/.bin/IDX file, several (a,b), a glob, a directory or a dataset.yaml")
      ->excludes(dataset);
  cmd->add_option("--val", o.val, "Evaluate on this data (default: the data's val or test split, else --val-fraction)");
  cmd->add_option("--val-fraction", o.val_fraction,
                  "Without a val split: this seeded, stratified fraction of the training data evaluates")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--inputs", o.inputs, "The fields the model reads (default: all but the target)")->delimiter(',');
  cmd->add_option("--target", o.target, "The field to predict (default: the one named label, labels, y, target, class or cls)");
  cmd->add_option("--token-dtype", o.token_dtype, "Raw .bin token files: u8, u16 or u32")
      ->check(CLI::IsMember({"u8", "u16", "u32"}))->capture_default_str();
  cmd->add_option("--seq-len", o.seq_len,
                  "Language-model windows: cut the token stream into windows of this many ids (targets: the next ids)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--normalize", o.normalize,
                  "Normalise each input field to zero mean, unit variance: standard (the training split's statistics) "
                  "or a file of `troupe data inspect --stats-out`");
  cmd->add_flag("--stream", o.stream,
                "Read the training inputs from the files as batches are cut (datasets larger than memory)");
  cmd->add_option("--loss", o.loss, "xent (the target is classes) or mse (the target is values: regression)")
      ->check(CLI::IsMember({"xent", "mse"}))->capture_default_str();
  cmd->add_option("--save", o.save_path, "Write the trained model here (safetensors) when the job ends");
  cmd->add_option("--save-dtype", f.save_dtype, "The saved tensors' type: f32, bf16 or f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))->capture_default_str();
  cmd->add_option("--init-from", o.init_from, "Start from this safetensors model's parameters (fine-tuning)");
  cmd->add_flag("--init-partial", o.init_partial, "--init-from: keep the blocks the file lacks as initialised");
  cmd->add_option("--epochs", o.epochs, "Passes over the training set")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--batch-size", o.batch_size, batch_help)->check(CLI::Range(1, 65536))->capture_default_str();
  cmd->add_option("--last-batch", o.last_batch,
                  "An epoch's remainder: drop it, or pad (one short last step over exactly those examples; sync "
                  "replicas without rows join with zero weight). Default: drop (async: its workers' short batches)")
      ->check(CLI::IsMember({"drop", "pad"}));
  cmd->add_option("--optimizer", o.optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))->capture_default_str();
  cmd->add_option("--lr", o.lr, "Peak learning rate (default: sgd 0.05, adam/adamw 0.002)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--lr-schedule", o.lr_schedule, "constant, or cosine decay to 0 over the job")
      ->check(CLI::IsMember({"constant", "cosine"}))->capture_default_str();
  cmd->add_option("--lr-scaling", o.lr_scaling, "none, or linear: lr x batch-size / lr-reference-batch")
      ->check(CLI::IsMember({"none", "linear"}))->capture_default_str();
  cmd->add_option("--lr-reference-batch", o.lr_reference_batch, "The batch --lr is meant for (linear scaling)")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  cmd->add_option("--warmup-steps", o.warmup_steps, "Ramp the rate up linearly over this many steps")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--accumulate", o.accumulate, "Micro-batches per step whose gradients are summed (CPU)")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  cmd->add_option("--precision", f.precision, "f32, or bf16 / f16 compute with f32 master weights (f16: loss scaling)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))->capture_default_str();
  cmd->add_option("--loss-scale", o.loss_scale, "f16: the dynamic loss scale to start from")->capture_default_str();
  cmd->add_option("--loss-scale-interval", o.loss_scale_interval,
                  "f16: finite steps in a row before the loss scale doubles")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--loss-scale-max-skips", o.loss_scale_max_skips,
                  "f16: overflowing steps in a row before training stops with an error")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--momentum", o.momentum, "SGD momentum in [0, 1)")->capture_default_str();
  cmd->add_option("--weight-decay", o.weight_decay, "L2 (sgd, adam) or decoupled (adamw) weight decay")
      ->capture_default_str();
  cmd->add_option("--weight-decay-params", o.weight_decay_params,
                  "adamw: decay all blocks, or matrices only (rank >= 2: weights, embeddings; not biases, norms)")
      ->check(CLI::IsMember({"all", "matrices"}))->capture_default_str();
  cmd->add_option("--clip-grad-norm", o.clip_grad_norm,
                  "Scale the whole model's gradient down to this global L2 norm before each update (0: off)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of initialisation and shuffling")->capture_default_str();
  cmd->add_option("--max-steps", o.max_steps, "Stop after this many steps (0: run all epochs)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", f.json, "Print one JSON object with the results as the last line");
  cmd->add_flag("--no-progress", f.no_progress, "Do not draw the progress bar");
}

Status finish_train_flags(TrainFlags& f) {
  auto hidden = parse_sizes(f.hidden);
  if (!hidden.ok()) return hidden.status();
  f.options.hidden = *hidden;
  if (!parse_dtype(f.precision, &f.options.precision))
    return invalid_argument("--precision '" + f.precision + "' is not one of f32, bf16, f16");
  if (!parse_dtype(f.save_dtype, &f.options.save_dtype))
    return invalid_argument("--save-dtype '" + f.save_dtype + "' is not one of f32, bf16, f16");
  // Jobs read the data on other processes, in other folders: paths from here on are absolute.
  TROUPE_RETURN_IF_ERROR(expand_model_file(f.options));
  f.options.data = data::absolute_spec(f.options.data);
  f.options.val = data::absolute_spec(f.options.val);
  if (!f.options.init_from.empty()) f.options.init_from = std::filesystem::absolute(f.options.init_from).string();
  if (!f.options.save_path.empty()) f.options.save_path = std::filesystem::absolute(f.options.save_path).string();
  const std::string& n = f.options.normalize;
  if (!n.empty() && n != "none" && n != "standard") f.options.normalize = std::filesystem::absolute(n).string();
  return {};
}

void draw_progress(ProgressBar& bar, const TrainProgress& p) {
  char label[32], status[160];
  std::snprintf(label, sizeof label, "epoch %d/%d", p.epoch, p.epochs);
  if (p.epoch_done) {
    const EpochStats& e = p.last_epoch;
    if (e.test_accuracy >= 0)
      std::snprintf(status, sizeof status, "%s: loss %.4f  train acc %.4f  test acc %.4f  %s samples/s  %.1f s", label,
                    e.train_loss, e.train_accuracy, e.test_accuracy, format_count(e.samples_per_second).c_str(),
                    e.seconds);
    else
      std::snprintf(status, sizeof status, "%s: loss %.5g  test loss %.5g  %s samples/s  %.1f s", label, e.train_loss,
                    e.test_loss, format_count(e.samples_per_second).c_str(), e.seconds);
    bar.println(status);
    return;
  }
  std::snprintf(status, sizeof status, "loss %.4f  %s samples/s  ETA %s", p.loss,
                format_count(p.samples_per_second).c_str(), format_duration(p.eta_seconds).c_str());
  bar.update(label, p.step, p.steps_per_epoch, status);
}

}  // namespace troupe::cli
