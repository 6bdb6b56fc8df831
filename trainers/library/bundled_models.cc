#include "trainers/library/bundled_models.h"

#include <algorithm>
#include <filesystem>

#include "core/process.h"
#include "trainers/library/trainer_library.h"

namespace troupe {
namespace {

constexpr const char* kPrefix = "libtroupe_model_";
constexpr const char* kSuffix = ".so";

}  // namespace

std::string bundled_models_dir() {
  const std::filesystem::path exe(self_executable());
  return (exe.parent_path().parent_path() / "lib" / "troupe" / "models").string();
}

std::vector<std::string> bundled_model_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(bundled_models_dir(), ec)) {
    const std::string file = e.path().filename().string();
    const size_t p = std::char_traits<char>::length(kPrefix), s = std::char_traits<char>::length(kSuffix);
    if (file.size() > p + s && file.rfind(kPrefix, 0) == 0 && file.compare(file.size() - s, s, kSuffix) == 0)
      names.push_back(file.substr(p, file.size() - p - s));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status load_bundled_model(const std::string& name) {
  const std::string path = bundled_models_dir() + "/" + kPrefix + name + kSuffix;
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || !std::filesystem::exists(path, ec))
    return not_found("no bundled model '" + name + "' in " + bundled_models_dir());
  auto lib = load_trainer_library(path);
  if (!lib.ok()) return lib.status().with_context("loading the bundled model '" + name + "'");
  return {};
}

}  // namespace troupe
