// Config: the values of every setting in core/config_def.h, with defaults, environment overrides
// (TROUPE_<NAME>) and explicit `name=value` overrides. Unknown names and unparsable values are
// invalid_argument errors naming the setting and the value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

#ifndef TROUPE_DEFAULT_DATASET_DIR
#define TROUPE_DEFAULT_DATASET_DIR "/usr/share/datasets/fashion-mnist"
#endif

namespace troupe {

struct SettingInfo {
  std::string name;
  std::string type;           // "string", "int", "double", "bool"
  std::string default_value;  // as text
  std::string doc;
};

struct Config {
#define TROUPE_SETTING(type, name, def, doc) type name = def;
#include "core/config_def.h"
#undef TROUPE_SETTING

  // Defaults, then every TROUPE_<NAME> variable of the environment.
  static Expected<Config> from_environment();

  // Sets one setting from text ("1", "true", "warn"...).
  Status set(const std::string& name, const std::string& value);
  // Parses "name=value" and sets it.
  Status set_assignment(const std::string& assignment);
  // The current value of a setting as text.
  Expected<std::string> get(const std::string& name) const;

  // The whole table: names, types, defaults, docs, in declaration order.
  static const std::vector<SettingInfo>& settings();
};

}  // namespace troupe
