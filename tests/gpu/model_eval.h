// What a user does with a model file a GPU run wrote: load it into the CPU trainer of the same name
// (its blocks by name and shape) and count the test split right there.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "trainers/setup/model_file.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::test {

// A path in a fresh folder of the system's temporary directory, unique to this process and `name`.
inline std::string model_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("troupe-gpu-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// The test accuracy of the model file at `path` as options.model on the CPU (REQUIREs it loads).
inline double cpu_accuracy(const std::string& path, TrainOptions o, const Dataset& test) {
  o.device = Device::cpu();
  auto setup = set_up_trainer(o, test.spec(), 0, 1);
  REQUIRE(setup.ok());
  std::vector<float> params(setup->space.size());
  const Status loaded = load_model_into(path, setup->space, o.model, false, params.data());
  INFO(loaded.to_string());
  REQUIRE(loaded.ok());
  auto correct = count_correct(*setup->trainer, Parameters(params.data(), params.size()), test, 0, test.count);
  REQUIRE(correct.ok());
  return static_cast<double>(*correct) / static_cast<double>(test.count);
}

// A model trained on the CPU with `cpu` and saved under `name`, and its test accuracy there
// (REQUIREd above 0.6: a model worth starting from).
struct TrainedFile {
  std::string path;
  double accuracy = 0;
};
inline TrainedFile cpu_trained_file(TrainOptions cpu, const Dataset& train, const Dataset& test,
                                    const std::string& name) {
  cpu.device = Device::cpu();
  cpu.save_path = model_path(name);
  auto trained = train_with_trainer(cpu, train, test);
  INFO(trained.status().to_string());
  REQUIRE(trained.ok());
  TrainedFile f{cpu.save_path, cpu_accuracy(cpu.save_path, cpu, test)};
  REQUIRE(f.accuracy > 0.6);
  return f;
}

// `o` starting from the model file at `path` and taking steps of a negligible size (sgd at 1e-7,
// constant): a run that evaluates what it started from.
inline TrainOptions negligible_steps_from(TrainOptions o, const std::string& path) {
  o.init_from = path;
  o.save_path.clear();
  o.optimizer = "sgd";
  o.lr = 1e-7f;
  o.lr_schedule = "constant";
  return o;
}

}  // namespace troupe::test
