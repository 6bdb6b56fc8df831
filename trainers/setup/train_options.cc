#include "trainers/setup/train_options.h"

#include <algorithm>
#include <cmath>

#include "trainers/library/trainer_registry.h"

namespace troupe {

float TrainOptions::effective_lr() const {
  const float base = lr != 0.0f ? lr : optimizer == "sgd" ? 0.05f : 0.002f;
  if (lr_scaling != "linear") return base;
  return base * static_cast<float>(batch_size) / static_cast<float>(lr_reference_batch);
}

Status TrainOptions::validate() const {
  if (!trainer_registry().contains(model)) {
    return invalid_argument("--model '" + model + "' is not a known trainer; known: " + trainer_registry().names_list() +
                            " (a trainer of your own: build it as a library and pass --lib libmine.so)");
  }
  if (dataset != "fashion-mnist") {
    return invalid_argument("--dataset '" + dataset + "' is not known; available: fashion-mnist");
  }
  for (int h : hidden) {
    if (h <= 0 || h > (1 << 16)) {
      return invalid_argument("--hidden: layer size " + std::to_string(h) + " must be in [1, 65536]");
    }
  }
  if (epochs <= 0) return invalid_argument("--epochs must be >= 1 (got " + std::to_string(epochs) + ")");
  if (batch_size <= 0 || batch_size > 65536) {
    return invalid_argument("--batch-size must be in [1, 65536] (got " + std::to_string(batch_size) + ")");
  }
  if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw") {
    return invalid_argument("--optimizer '" + optimizer + "' is not one of sgd, adam, adamw");
  }
  if (!(lr >= 0.0f) || !std::isfinite(lr)) {
    return invalid_argument("--lr must be a positive finite number (got " + std::to_string(lr) + ")");
  }
  if (lr_schedule != "constant" && lr_schedule != "cosine") {
    return invalid_argument("--lr-schedule '" + lr_schedule + "' is not one of constant, cosine");
  }
  if (!(momentum >= 0.0f && momentum < 1.0f)) return invalid_argument("--momentum must be in [0, 1)");
  if (!(weight_decay >= 0.0f) || !std::isfinite(weight_decay)) return invalid_argument("--weight-decay must be >= 0");
  if (weight_decay_params != "all" && weight_decay_params != "matrices")
    return invalid_argument("--weight-decay-params '" + weight_decay_params + "' is not one of all, matrices");
  if (weight_decay_params == "matrices" && optimizer != "adamw")
    return invalid_argument("--weight-decay-params matrices chooses the blocks of adamw's decoupled decay; --optimizer " +
                            optimizer + " adds its L2 term to every block: use --optimizer adamw, or drop it");
  if (!(clip_grad_norm >= 0.0f) || !std::isfinite(clip_grad_norm))
    return invalid_argument("--clip-grad-norm must be a finite number >= 0 (0: off; got " +
                            std::to_string(clip_grad_norm) + ")");
  if (device.is_cuda() && (clip_grad_norm > 0.0f || weight_decay_params != "all"))
    return invalid_argument("--clip-grad-norm and --weight-decay-params matrices run on the CPU path only for now; "
                            "drop them with --device " + device.to_string());
  if (cpu_threads < 1 || cpu_threads > 1024) return invalid_argument("cpu_threads must be in [1, 1024]");
  if (loss_check_every < 1) return invalid_argument("loss_check_every must be >= 1");
  if (max_steps < 0) return invalid_argument("--max-steps must be >= 0");
  if (lr_scaling != "none" && lr_scaling != "linear")
    return invalid_argument("--lr-scaling '" + lr_scaling + "' is not one of none, linear");
  if (lr_reference_batch < 1) return invalid_argument("--lr-reference-batch must be >= 1");
  if (warmup_steps < 0) return invalid_argument("--warmup-steps must be >= 0");
  if (accumulate < 1 || batch_size % accumulate != 0)
    return invalid_argument("--accumulate " + std::to_string(accumulate) + " must be >= 1 and divide --batch-size " +
                            std::to_string(batch_size));
  if (!(loss_scale >= 1.0f && loss_scale <= 16777216.0f))
    return invalid_argument("--loss-scale must be in [1, 16777216] (got " + std::to_string(loss_scale) + ")");
  if (loss_scale_interval < 1)
    return invalid_argument("--loss-scale-interval must be >= 1 (got " + std::to_string(loss_scale_interval) + ")");
  if (loss_scale_max_skips < 1)
    return invalid_argument("--loss-scale-max-skips must be >= 1 (got " + std::to_string(loss_scale_max_skips) + ")");
  if (accumulate > 1 && device.is_cuda())
    return invalid_argument("--accumulate runs on the CPU path only for now; drop it with --device " +
                            device.to_string());
  if (!last_batch.empty() && last_batch != "drop" && last_batch != "pad")
    return invalid_argument("--last-batch '" + last_batch + "' is not one of drop, pad");
  if (pads_last_batch() && device.is_cuda())
    return invalid_argument("--last-batch pad runs on the CPU path only for now (the GPU trainers train whole "
                            "batches); drop it with --device " + device.to_string());
  return {};
}

LossScaleOptions TrainOptions::loss_scale_options() const {
  LossScaleOptions o;
  o.initial = loss_scale;
  o.interval = loss_scale_interval;
  o.max_skipped_in_a_row = loss_scale_max_skips;
  return o;
}

}  // namespace troupe
