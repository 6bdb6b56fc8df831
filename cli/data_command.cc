// `troupe data inspect SPEC [--json]`: a dataset's schema (splits, fields with their type and
// per-example shape), counts, per-field min/max/mean and class balance, every file read to its end
// and checked. SPEC is what --data takes (data/dataset_spec.h).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "data/dataset_spec.h"
#include "data/inspect.h"

namespace troupe::cli {

Runner add_data_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("data", "Look at a dataset before training on it");
  cmd->require_subcommand(1);
  auto* inspect = cmd->add_subcommand("inspect", "Schema, counts, statistics and class balance of --data SPEC");
  auto spec = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto options = std::make_shared<data::SpecOptions>();
  inspect->add_option("spec", *spec, "A file, files a,b, a glob, a directory or a dataset.yaml")->required();
  inspect->add_option("--target", options->target, "CSV: the label column (default: label, labels, y, target, class or cls)");
  inspect->add_option("--token-dtype", options->token_dtype, "Raw .bin token files: u8, u16 or u32")
      ->check(CLI::IsMember({"u8", "u16", "u32"}))->capture_default_str();
  inspect->add_flag("--json", *json, "Print one JSON object");
  return [spec, json, options]() {
    auto opened = data::open_dataset(*spec, *options);
    if (!opened.ok()) return report_error("data inspect", opened.status());
    const auto stats = data::inspect(*opened);
    if (*json) {
      std::printf("%s\n", data::to_json(stats, *opened).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::fputs(data::to_text(stats, *opened).c_str(), stdout);
    }
    return 0;
  };
}

}  // namespace troupe::cli
