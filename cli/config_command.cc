// `troupe config`: every setting with its current value, default and doc line (--json for scripts).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"

namespace troupe::cli {

Runner add_config_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("config", "Print every setting: value, default and what it does");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object instead of a table");
  return [&global, json]() {
    nlohmann::json out = nlohmann::json::array();
    for (const SettingInfo& s : Config::settings()) {
      std::string value = global.config.get(s.name).value();
      if (*json) {
        out.push_back({{"name", s.name}, {"type", s.type}, {"value", value}, {"default", s.default_value},
                       {"doc", s.doc}});
      } else {
        std::printf("%-22s %-8s %s%s\n    %s\n", s.name.c_str(), s.type.c_str(), value.c_str(),
                    value == s.default_value ? "" : (" (default " + s.default_value + ")").c_str(), s.doc.c_str());
      }
    }
    if (*json) std::printf("%s\n", out.dump().c_str());
    return 0;
  };
}

}  // namespace troupe::cli
