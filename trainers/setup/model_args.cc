#include "trainers/setup/model_args.h"

#include <filesystem>

namespace troupe {
namespace {

struct ModelArgs {
  const char* model;
  const char* file_key;  // the trainer arg naming its file ("" none)
  bool takes_cpus;       // sizes threads of its own to the runtime arg cpus=N
};
constexpr ModelArgs kModels[] = {{"torchscript", "file", true}};

// The index of `key=...` in `args`, or -1.
int find_arg(const std::vector<std::string>& args, const std::string& key) {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].rfind(key + "=", 0) == 0) return static_cast<int>(i);
  return -1;
}

}  // namespace

std::string model_file_key(const std::string& model) {
  for (const ModelArgs& m : kModels)
    if (model == m.model) return m.file_key;
  return "";
}

bool model_takes_cpus(const std::string& model) {
  for (const ModelArgs& m : kModels)
    if (model == m.model) return m.takes_cpus;
  return false;
}

std::string model_file_path(const TrainOptions& o) {
  const std::string key = model_file_key(o.model);
  if (key.empty()) return "";
  const int i = find_arg(o.trainer_args, key);
  return i < 0 ? "" : o.trainer_args[static_cast<size_t>(i)].substr(key.size() + 1);
}

Status expand_model_file(TrainOptions& o) {
  const size_t colon = o.model.find(':');
  if (colon != std::string::npos) {
    const std::string name = o.model.substr(0, colon), file = o.model.substr(colon + 1);
    const std::string key = model_file_key(name);
    if (key.empty())
      return invalid_argument("--model " + o.model + ": '" + name + "' reads no file (NAME:FILE is for torchscript:"
                              "model.pt); give --model " + name);
    if (file.empty())
      return invalid_argument("--model " + o.model + " names no file: give the module saved from Python, e.g. --model " +
                              name + ":model.pt");
    if (find_arg(o.trainer_args, key) >= 0)
      return invalid_argument("--model " + o.model + " and --trainer-arg " + key + "=... both name the file: give one");
    o.model = name;
    o.trainer_args.push_back(key + "=" + file);
  }
  const std::string key = model_file_key(o.model);
  const int i = key.empty() ? -1 : find_arg(o.trainer_args, key);
  if (i >= 0) {
    std::string& arg = o.trainer_args[static_cast<size_t>(i)];
    const std::string path = arg.substr(key.size() + 1);
    if (!path.empty()) arg = key + "=" + std::filesystem::absolute(path).lexically_normal().string();
  }
  return {};
}

}  // namespace troupe
