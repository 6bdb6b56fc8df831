#include <ATen/ATen.h>

#include <string>

#include "models/torch/module_trainer.h"

namespace troupe::torch_model {

std::string running_libtorch_version() {
  const std::string config = at::show_config();  // "... TORCH_VERSION=1.13.0, ..."
  const std::string key = "TORCH_VERSION=";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "";
  const size_t end = config.find_first_of(", \n", at + key.size());
  return config.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

namespace {

std::string major_minor(const std::string& v) {
  const size_t dot = v.find('.');
  return dot == std::string::npos ? v : v.substr(0, v.find('.', dot + 1));
}

}  // namespace

Status check_libtorch(const std::string& compiled, const std::string& what) {
  const std::string running = running_libtorch_version();
  if (running.empty() || major_minor(running) == major_minor(compiled)) return {};
  return Status(Code::version_mismatch,
                what + " was built against libtorch " + compiled + ", but this process runs libtorch " + running +
                    ": build the library against the libtorch the nodes have (find_package(Torch) finding it: "
                    "-DTorch_DIR=<its share/cmake/Torch>), or give the nodes the libtorch it was built with");
}

}  // namespace troupe::torch_model
