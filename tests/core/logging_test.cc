// Logging: one file per process in the configured directory, levels, and failures that say why.
#include "core/logging.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "tests/core/temp_dir.h"

namespace troupe {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Points the default logger back at stderr only, closing the test's log file.
void restore_console_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("console", sink));
}

}  // namespace

TEST_CASE("logging: parse_log_level", "[core][logging]") {
  spdlog::level::level_enum l = spdlog::level::critical;
  REQUIRE(parse_log_level("debug", &l));
  CHECK(l == spdlog::level::debug);
  REQUIRE(parse_log_level("warning", &l));
  CHECK(l == spdlog::level::warn);
  REQUIRE(parse_log_level("off", &l));
  CHECK(l == spdlog::level::off);
  CHECK_FALSE(parse_log_level("verbose", &l));
  CHECK_FALSE(parse_log_level("INFO", &l));
  CHECK(l == spdlog::level::off);
}

TEST_CASE("logging: init_logging writes <dir>/<process>-<pid>.log", "[core][logging]") {
  testing::TempDir tmp;
  LogOptions o;
  o.process_name = "unit";
  o.log_dir = tmp.file("nested/logs");  // created on demand
  o.file_level = "info";
  o.console_level = "off";
  REQUIRE(init_logging(o).ok());
  std::string expected = o.log_dir + "/unit-" + std::to_string(::getpid()) + ".log";
  CHECK(log_file_path() == expected);
  REQUIRE(std::filesystem::exists(expected));

  spdlog::info("marker-info-{}", 17);
  spdlog::debug("marker-debug-hidden");
  spdlog::warn("marker-warn");
  spdlog::default_logger()->flush();
  std::string text = slurp(expected);
  CHECK_THAT(text, Catch::Contains("marker-info-17"));
  CHECK_THAT(text, Catch::Contains("marker-warn"));
  CHECK_THAT(text, !Catch::Contains("marker-debug-hidden"));  // below the file level
  restore_console_logger();
}

TEST_CASE("logging: init_logging can be called again to move the log", "[core][logging]") {
  testing::TempDir tmp;
  LogOptions o;
  o.process_name = "again";
  o.console_level = "off";
  o.log_dir = tmp.file("first");
  REQUIRE(init_logging(o).ok());
  o.log_dir = tmp.file("second");
  REQUIRE(init_logging(o).ok());
  CHECK_THAT(log_file_path(), Catch::StartsWith(o.log_dir + "/again-"));
  spdlog::error("marker-second");
  spdlog::default_logger()->flush();
  CHECK_THAT(slurp(log_file_path()), Catch::Contains("marker-second"));
  restore_console_logger();
}

TEST_CASE("logging: an unknown level is invalid_argument and creates nothing", "[core][logging]") {
  testing::TempDir tmp;
  LogOptions o;
  o.log_dir = tmp.file("logs");
  o.file_level = "loud";
  Status s = init_logging(o);
  CHECK(s.code() == Code::invalid_argument);
  CHECK_THAT(s.message(), Catch::Contains("'loud'"));
  CHECK_FALSE(std::filesystem::exists(o.log_dir));
  o.file_level = "info";
  o.console_level = "chatty";
  s = init_logging(o);
  CHECK(s.code() == Code::invalid_argument);
  CHECK_THAT(s.message(), Catch::Contains("'chatty'"));
}

TEST_CASE("logging: an unwritable directory is io_error naming it", "[core][logging]") {
  testing::TempDir tmp;
  std::ofstream(tmp.file("plain-file")) << "x";  // a file where a directory is needed: fails even for root
  LogOptions o;
  o.log_dir = tmp.file("plain-file/logs");
  o.console_level = "off";
  Status s = init_logging(o);
  CHECK(s.code() == Code::io_error);
  CHECK_THAT(s.message(), Catch::Contains(o.log_dir));
  CHECK_THAT(s.message(), Catch::Contains("log_dir"));
}

}  // namespace troupe
