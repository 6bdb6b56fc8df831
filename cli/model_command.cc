// `troupe model inspect FILE [--json]`: a safetensors model's tensors (name, dtype, shape) and its
// metadata (for troupe's: trainer, arguments, data, step, epoch, test accuracy, version), the file
// checked whole (data/safetensors.h).
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "data/safetensors.h"

namespace troupe::cli {

Runner add_model_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("model", "Look at a trained model file");
  cmd->require_subcommand(1);
  auto* inspect = cmd->add_subcommand("inspect", "Tensors, shapes, dtypes and metadata of a .safetensors file");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  inspect->add_option("file", *path, "The model file")->required();
  inspect->add_flag("--json", *json, "Print one JSON object");
  return [path, json]() {
    auto f = data::read_safetensors(*path);
    if (!f.ok()) return report_error("model inspect", f.status());
    int64_t total = 0;
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : f->tensors) {
      const int64_t n = data::shape_product(t.shape);
      total += n;
      tensors.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"elements", n}});
    }
    if (*json) {
      std::printf("%s\n", nlohmann::json{{"file", *path}, {"tensors", tensors}, {"parameters", total},
                                         {"metadata", f->metadata}}
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                             .c_str());
      return 0;
    }
    std::printf("%s: %zu tensors, %lld parameters\n", path->c_str(), f->tensors.size(), static_cast<long long>(total));
    for (const auto& t : tensors)
      std::printf("  %-24s %-5s %s\n", t["name"].get<std::string>().c_str(), t["dtype"].get<std::string>().c_str(),
                  t["shape"].dump().c_str());
    if (!f->metadata.empty()) std::printf("metadata:\n");
    for (const auto& [k, v] : f->metadata) std::printf("  %-22s %s\n", k.c_str(), v.c_str());
    return 0;
  };
}

}  // namespace troupe::cli
