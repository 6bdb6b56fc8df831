// `troupe config` and the global --set / TROUPE_<NAME> overrides, through the real binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "tests/support/run_command.h"

using troupe::testing::CommandResult;
using troupe::testing::run_command;
using troupe::testing::troupe_binary;

TEST_CASE("troupe config --json lists every setting of the table", "[cli][config]") {
  CommandResult r = run_command(troupe_binary() + " config --json");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.last_line());
  const auto& table = troupe::Config::settings();
  REQUIRE(j.size() == table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    CHECK(j[i].at("name") == table[i].name);
    CHECK(j[i].at("default") == table[i].default_value);
    CHECK(!j[i].at("doc").get<std::string>().empty());
  }
}

TEST_CASE("settings are overridden by the environment, then by --set", "[cli][config]") {
  CommandResult env = run_command("TROUPE_CPU_THREADS=3 " + troupe_binary() + " config --json");
  REQUIRE(env.exit_code == 0);
  CommandResult set = run_command("TROUPE_CPU_THREADS=3 " + troupe_binary() + " --set cpu_threads=5 config --json");
  REQUIRE(set.exit_code == 0);
  auto value_of = [](const CommandResult& r, const std::string& name) {
    for (const auto& s : nlohmann::json::parse(r.last_line())) {
      if (s.at("name") == name) return s.at("value").get<std::string>();
    }
    return std::string("<missing>");
  };
  CHECK(value_of(env, "cpu_threads") == "3");
  CHECK(value_of(set, "cpu_threads") == "5");
}

TEST_CASE("a bad environment setting is an error naming the variable", "[cli][config][errors]") {
  CommandResult r = run_command("TROUPE_LOSS_CHECK_EVERY=often " + troupe_binary() + " config");
  INFO(r.both());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("TROUPE_LOSS_CHECK_EVERY") != std::string::npos);
}

TEST_CASE("troupe --version and --help answer without a subcommand's work", "[cli]") {
  CommandResult v = run_command(troupe_binary() + " --version");
  CHECK(v.exit_code == 0);
  CHECK(v.both().find("troupe 0.") != std::string::npos);
  CommandResult h = run_command(troupe_binary() + " train --help");
  CHECK(h.exit_code == 0);
  CHECK(h.both().find("--batch-size") != std::string::npos);
  CommandResult none = run_command(troupe_binary());
  CHECK(none.exit_code == 2);
}
