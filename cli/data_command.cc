// `troupe data inspect SPEC [--json]`: a dataset's schema (splits, fields with their type and
// per-example shape), counts, per-field min/max/mean/std and class balance, every file read to its
// end and checked; --stats-out FILE keeps the training split's mean and std for --normalize FILE.
// SPEC is what --data takes (data/dataset_spec.h).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/durable_file.h"
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
  auto stats_out = std::make_shared<std::string>();
  inspect->add_option("--stats-out", *stats_out,
                      "Also write the training split's per-field mean and std here, for --normalize FILE");
  return [spec, json, options, stats_out]() {
    auto opened = data::open_dataset(*spec, *options);
    if (!opened.ok()) return report_error("data inspect", opened.status());
    const auto stats = data::inspect(*opened);
    if (!stats_out->empty()) {
      std::string split = opened->splits.count("train") ? "train" : "";
      if (split.empty() && opened->splits.size() == 1) split = opened->splits.begin()->first;
      if (split.empty())
        return report_error("data inspect", invalid_argument("--stats-out: " + *spec + " has no split named train"));
      const std::string text = data::normalization_stats(stats, split).dump(1) + "\n";
      Status st = write_file_durably(*stats_out, text, "normalization statistics");
      if (!st.ok()) return report_error("data inspect", st.with_context("--stats-out"));
    }
    if (*json) {
      std::printf("%s\n", data::to_json(stats, *opened).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::fputs(data::to_text(stats, *opened).c_str(), stdout);
    }
    return 0;
  };
}

}  // namespace troupe::cli
