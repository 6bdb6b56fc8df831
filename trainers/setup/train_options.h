// What a local training job is asked to do (TrainOptions), what it reports while it runs
// (TrainProgress) and what it returns (TrainResult). The CPU and GPU trainers share these, and later
// strategies generalise them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/loss_scale.h"
#include "core/status.h"
#include "data/data_options.h"
#include "data/feed/epoch_order.h"

namespace troupe {

struct TrainOptions : DataOptions {  // the data it trains on: data/data_options.h
  std::string model = "mlp";        // a registered trainer (trainers/library/trainer_registry.h): mlp, or a library's
  std::vector<std::string> trainer_args;  // key=value settings for the trainer (trainers/api/trainer.h JobConfig)
  // Settings this process's runtime gives the trainer beside trainer_args, "key=value" — a cluster
  // job's GCS copy of the model's file as "file_local" where the file arg's path does not hold it
  // (trainers/job/job_model_file.h), a worker's cpus as "cpus" to the models that size threads of
  // their own (trainers/setup/model_args.h). Never saved with a model: its metadata keeps trainer_args.
  std::vector<std::string> runtime_args;
  std::vector<int> hidden = {256, 128};
  // The model in and out (trainers/setup/model_file.h): start from a safetensors file's parameters
  // (--init-from; --init-partial keeps blocks the file lacks), and write the final parameters
  // there when the job ends (--save, as --save-dtype f32|bf16|f16).
  std::string init_from;
  bool init_partial = false;
  std::string save_path;
  DType save_dtype = DType::f32;
  int epochs = 10;
  int batch_size = 128;
  // The last batch of an epoch when the examples do not fill it (--last-batch): "drop" (whole
  // batches only: count / batch_size steps, the remainder seen in other epochs' orders), "pad" (one
  // more, short step of the remaining examples; in a sync job every replica takes that step, a
  // replica with fewer rows weighted by them and one with none by a zero-weight row, so the update
  // is the mean over exactly the remaining examples and no collective waits: epoch_steps), or ""
  // (the strategy's default: drop, except async jobs, whose workers train their short last batch).
  std::string last_batch;
  std::string optimizer = "adam";   // sgd, adam, adamw
  float lr = 0;                     // 0: the optimizer's default (default_lr)
  // "linear": the rate is lr * batch_size / lr_reference_batch (the linear scaling rule for global
  // batches that grow with the number of replicas); "none": lr as given.
  std::string lr_scaling = "none";
  int lr_reference_batch = 128;
  int64_t warmup_steps = 0;         // linear warm-up to the rate over this many steps (lr_schedule.h)
  // Gradient accumulation: each step's batch is processed as this many micro-batches whose gradients
  // are summed (and averaged) before one update: the same update as one batch, in less memory.
  int accumulate = 1;
  // Compute precision: f32, or bf16 / f16 with f32 master weights (mixed precision; f16 with dynamic
  // loss scaling, trainers/optim/loss_scale.h). The trainer must support it (Trainer::supports_precision).
  DType precision = DType::f32;
  float loss_scale = 65536.0f;      // f16: the dynamic loss scale's starting value, in [1, 2^24]
  int64_t loss_scale_interval = 2000;  // f16: finite steps in a row before the scale doubles
  int64_t loss_scale_max_skips = 100;  // f16: overflowing steps in a row before training stops
  std::string lr_schedule = "cosine";  // constant, or cosine decay to 0 over the job (trainers/optim/lr_schedule.h)
  float momentum = 0.9f;            // sgd only
  float weight_decay = 0.0f;
  // adamw's decoupled decay on every block ("all") or on the blocks of rank >= 2 only
  // ("matrices": weights and embeddings, not biases or LayerNorm gains; trainers/optim/optimizer.h).
  std::string weight_decay_params = "all";
  // > 0: before each update the gradient is scaled down to this global L2 norm when it is longer
  // (the whole model's gradient; in a sync job the averaged one, after the all-reduce). 0: off.
  float clip_grad_norm = 0.0f;
  Device device = Device::cpu();
  int cpu_threads = 1;              // BLAS threads
  int64_t loss_check_every = 1;     // steps between finiteness checks of the loss
  bool cuda_graphs = true;          // GPU: capture the step in a CUDA graph
  bool tf32 = false;                // GPU: cuDNN convolutions may use TF32 tensor cores
  int64_t max_steps = 0;            // >0: stop after this many steps (benchmarks)
  bool evaluate_each_epoch = true;  // test accuracy after every epoch (else only at the end)

  // The learning rate the job uses: `lr`, or when it is 0 the optimizer's default (sgd 0.05 with
  // momentum 0.9; adam and adamw 0.002), both tuned for the MLP on Fashion-MNIST with cosine decay;
  // times batch_size / lr_reference_batch with lr_scaling "linear".
  float effective_lr() const;
  // f16's dynamic loss scaling rule as these options set it (core/loss_scale.h).
  LossScaleOptions loss_scale_options() const;

  // invalid_argument naming the first bad field (epochs <= 0, lr <= 0, unknown optimizer, ...).
  Status validate() const;
  bool pads_last_batch() const { return last_batch == "pad"; }
};


struct EpochStats {
  int epoch = 0;                 // 1-based
  double train_loss = 0;         // mean over the epoch's steps
  double train_accuracy = 0;
  double test_accuracy = -1;     // -1 when not evaluated, or the model does not classify
  double test_loss = -1;         // mean loss over the test set; -1 when not evaluated
  double seconds = 0;
  double samples_per_second = 0;
};

struct TrainProgress {
  int epoch = 0, epochs = 0;     // epoch is 1-based
  int64_t step = 0, steps_per_epoch = 0;
  double loss = 0;               // running mean loss of the current epoch
  double samples_per_second = 0; // over the current epoch so far
  double eta_seconds = 0;        // for the whole job
  bool epoch_done = false;       // set once per epoch, with `last_epoch` filled in
  EpochStats last_epoch;
};
using ProgressFn = std::function<void(const TrainProgress&)>;

struct TrainResult {
  std::string model;             // "mlp 784-256-128-10 (235146 parameters)"
  std::string device;            // "cpu" or "cuda:0 (NVIDIA H100 ...)"
  int epochs = 0;
  int64_t steps = 0;
  double test_accuracy = 0;      // -1 when the model does not classify
  double test_loss = -1;         // mean test loss of the last evaluation (-1: none measured)
  double final_loss = 0;         // mean training loss of the last epoch
  double samples_per_second = 0; // training samples per second, excluding evaluation
  double wall_seconds = 0;       // whole job: loading, training, evaluation
  std::string precision = "f32";  // the compute precision (TrainOptions::precision)
  int64_t overflow_steps = 0;    // f16: steps skipped because a gradient overflowed (trainers/optim/loss_scale.h)
  float loss_scale = 0;          // f16: the loss scale at the end (0: none)
  std::vector<EpochStats> history;
};

}  // namespace troupe
