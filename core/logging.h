// Logging through spdlog: one log file per process (<log_dir>/<process>-<pid>.log) at the configured
// level, and the more important lines echoed to stderr. After init_logging, use spdlog's free
// functions (spdlog::info(...)) or the TROUPE_LOG_* names below anywhere in the process.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

#include "core/status.h"

namespace troupe {

struct LogOptions {
  std::string process_name = "troupe";  // file name prefix and logger name
  std::string log_dir = "/tmp/troupe/logs";
  std::string file_level = "info";      // trace, debug, info, warn, error, off
  std::string console_level = "warn";
};

// Creates the log directory and file and installs the process-wide default logger. Fails with
// invalid_argument for an unknown level and io_error when the directory or file cannot be created;
// the caller can carry on with the console-only logger spdlog starts with.
Status init_logging(const LogOptions& options);

// The file the current process logs to; empty before init_logging succeeded.
const std::string& log_file_path();

// Parses a level name; false for anything not in the list above.
bool parse_log_level(const std::string& name, spdlog::level::level_enum* out);

}  // namespace troupe
