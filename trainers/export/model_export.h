// `troupe export`: a job's checkpoint — of any strategy — as one model file (trainers/setup/model_file.h).
//
//   the job's trainer, set up with its settings and example shape (a --lib trainer: its library
//     loaded first, from --lib or fetched from the GCS)  -> the parameter layout (blocks, shapes)
//   -> the checkpoint chosen (checkpoint_choice.h: every shard verified) and read again shard by
//      shard (its shards tile the flat buffer), each shard's parameters written at their place
//   -> the model file (ModelWriter): one tensor per declared block under its name and shape, in f32, bf16 or f16,
//      with the metadata the job knows (trainer, description, arguments, data, step, epoch, troupe
//      version, and the job, its strategy and the checkpoint), written atomically
//
// The tensors are exactly those save_model writes for the same parameters in one process: a sync
// job's slices, a parameter-server job's ranges and a pipeline's stages all come back as the one
// flat buffer training had — without ever holding it whole (one shard file at a time: a sharded
// job's model that no single worker could hold exports on a machine that holds one shard).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gcs/store.h"
#include "trainers/export/checkpoint_source.h"

namespace troupe::exporting {

struct ExportOptions {
  std::string out;              // the model file to write
  int64_t step = -1;            // -1: the newest intact checkpoint
  DType dtype = DType::f32;     // the tensors' type
  std::string library;          // --lib: the trainer library of a job that trained a user's trainer
  gcs::Store* store = nullptr;  // a cluster's GCS: the job's library is fetched from it when no --lib
  std::string library_cache;    // where fetched libraries go ("": the system's temp dir)
};

struct ExportResult {
  std::string out;
  JobId job;
  std::string strategy;
  int64_t step = 0, epoch = 0;
  std::string checkpoint_dir;         // the step directory read
  std::string trainer, model;         // "mlp", "mlp 784-256-128-10"
  size_t parameters = 0;
  int shards = 0;                     // the checkpoint's shard files
  uint64_t bytes = 0;                 // of the model file
  DType dtype = DType::f32;
  std::vector<std::string> skipped;   // newer checkpoints not used, and why
  double seconds = 0;                 // the whole export
};

// Errors: --out's folder not writable (before anything is read), the trainer (a library not
// given or not loadable, unknown, a setup() error), choose_checkpoint's, the write's (io_error).
Expected<ExportResult> export_model(const CheckpointSource& src, const ExportOptions& options);

}  // namespace troupe::exporting
