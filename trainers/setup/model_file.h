// A trained model as a safetensors file (data/safetensors.h): one tensor per parameter block the
// trainer declared, under the block's name and shape, f32 (or bf16 / f16 rounded to nearest even);
// metadata names the trainer and how it was trained. `--save PATH` writes it when a job ends;
// `--init-from PATH` starts a job from it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "data/safetensors_writer.h"
#include "trainers/api/trainer.h"
#include "data/dataset.h"
#include "trainers/setup/train_options.h"

namespace troupe {

// Metadata keys troupe writes (all strings, as the format requires).
inline constexpr const char* kModelTrainer = "troupe.trainer";  // the registered trainer's name

// Writes `params` (space.size() floats) as the blocks of `space`.
Status save_model(const std::string& path, const ParameterSpace& space, const float* params, DType dtype,
                  const std::map<std::string, std::string>& metadata);

// The same file written a range of the flat parameters at a time, in any order (a sharded job's
// layers as they are gathered, a checkpoint's shards as they are read): never the whole model in
// memory. Nothing is at `path` until commit() (data::SafetensorsWriter); dropping the writer
// before leaves nothing.
class ModelWriter {
 public:
  static Expected<std::unique_ptr<ModelWriter>> create(const std::string& path, const ParameterSpace& space,
                                                       DType dtype, const std::map<std::string, std::string>& metadata);
  // The floats [begin, begin + count) of the flat layout.
  Status write_range(size_t begin, const float* values, size_t count);
  // internal_error unless every parameter was written; io_error naming the file.
  Status commit();

 private:
  ModelWriter() = default;
  std::unique_ptr<data::SafetensorsWriter> file_;
  const ParameterSpace* space_ = nullptr;  // outlives the writer
  DType dtype_ = DType::f32;
  std::vector<uint16_t> half_;
};

// Whether a model file can be written at `path` later (its folder exists and is writable): checked
// before training, so a --save that cannot be written fails the job at its start, not at its end.
// invalid_argument naming `flag`, the folder and the reason.
Status check_save_target(const std::string& path, const std::string& flag = "--save");

// Loads the file's tensors into `params` by block name. Every block must be in the file with its
// shape, and every tensor must be a block (a model file of another trainer is refused, naming the
// trainer it was written by); with `partial`, blocks missing from the file keep their values and
// tensors no block has are ignored (a new head on a trained body). `trainer` is checked against
// the file's troupe.trainer when it has one. Nothing is written into `params` unless all of it
// checks out.
Status load_model_into(const std::string& path, const ParameterSpace& space, const std::string& trainer, bool partial,
                       float* params);

// The metadata a job's model file carries: trainer, its description and arguments, the data and
// its schema (troupe.classes, troupe.target_width, troupe.schema: what `troupe predict` sets the
// trainer up with), the loss and token windows, the step and epoch reached, the test accuracy,
// troupe's version.
// `normalization`: the statistics the inputs were normalised by (Dataset::normalization; "" none).
std::map<std::string, std::string> model_metadata(const TrainOptions& o, const DataSpec& data,
                                                  const std::string& normalization, const std::string& description,
                                                  int64_t step, int epoch, double test_accuracy);

// --save at a training run's end: `params` (space.size() floats) written to options.save_path in
// options.save_dtype with model_metadata of `train` and `result` (its steps, last epoch, test
// accuracy). `description`: the model as TrainerSetup::model names it. Errors name --save.
Status save_trained_model(const TrainOptions& options, const Dataset& train, const ParameterSpace& space,
                          const std::string& description, const float* params, const TrainResult& result);
// The same for a loop that trains options.model outside a Trainer (the GPU models, which use its
// trainer's flat layout): the blocks are the ones the trainer declares for `train`'s shape.
// internal_error when `params` is not that many floats.
Status save_trained_model(const TrainOptions& options, const Dataset& train, const std::vector<float>& params,
                          const TrainResult& result);

}  // namespace troupe
