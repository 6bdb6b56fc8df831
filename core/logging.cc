#include "core/logging.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <system_error>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace troupe {
namespace {
std::string g_log_file;
}

bool parse_log_level(const std::string& name, spdlog::level::level_enum* out) {
  using L = spdlog::level::level_enum;
  if (name == "trace") *out = L::trace;
  else if (name == "debug") *out = L::debug;
  else if (name == "info") *out = L::info;
  else if (name == "warn" || name == "warning") *out = L::warn;
  else if (name == "error") *out = L::err;
  else if (name == "off") *out = L::off;
  else return false;
  return true;
}

Status init_logging(const LogOptions& options) {
  spdlog::level::level_enum file_level, console_level;
  if (!parse_log_level(options.file_level, &file_level)) {
    return invalid_argument("log level '" + options.file_level + "' is not one of trace, debug, info, warn, error, off");
  }
  if (!parse_log_level(options.console_level, &console_level)) {
    return invalid_argument("console log level '" + options.console_level +
                            "' is not one of trace, debug, info, warn, error, off");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.log_dir, ec);
  if (ec) {
    return io_error("cannot create log directory '" + options.log_dir + "': " + ec.message() +
                    "; set log_dir (TROUPE_LOG_DIR) to a writable directory");
  }
  std::string path = options.log_dir + "/" + options.process_name + "-" + std::to_string(::getpid()) + ".log";
  try {
    auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    console->set_level(console_level);
    console->set_pattern("%^[%l]%$ %v");
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
    file->set_level(file_level);
    file->set_pattern("%Y-%m-%dT%H:%M:%S.%e %P %t %l %v");
    auto logger = std::make_shared<spdlog::logger>(options.process_name, spdlog::sinks_init_list{console, file});
    logger->set_level(std::min(file_level, console_level));
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
    // Info lines reach the file within a second, so `troupe logs` and the dashboard's /api/logs
    // show a running process's recent lines (warnings and errors are flushed at once, above).
    spdlog::flush_every(std::chrono::seconds(1));
  } catch (const spdlog::spdlog_ex& e) {
    return io_error("cannot open log file '" + path + "': " + e.what());
  }
  g_log_file = path;
  return {};
}

const std::string& log_file_path() { return g_log_file; }

}  // namespace troupe
