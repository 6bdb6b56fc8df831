// Config: the settings table, defaults, text overrides, environment overrides and their errors.
#include "core/config.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>

namespace troupe {
namespace {

// Sets an environment variable for the scope of one test and restores the previous state.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("config: defaults", "[core][config]") {
  Config c;
  CHECK(c.log_level == "info");
  CHECK(c.console_log_level == "warn");
  CHECK(c.cpu_threads == 1);
  CHECK(c.progress == true);
  CHECK(c.dataset_dir == TROUPE_DEFAULT_DATASET_DIR);
  CHECK(c.get("cpu_threads").value() == "1");
  CHECK(c.get("progress").value() == "true");
}

TEST_CASE("config: the table documents every setting", "[core][config]") {
  const auto& table = Config::settings();
  REQUIRE(table.size() >= 9);
  std::set<std::string> names;
  Config defaults;
  for (const SettingInfo& s : table) {
    INFO(s.name);
    CHECK_FALSE(s.name.empty());
    CHECK_FALSE(s.doc.empty());
    CHECK(std::set<std::string>{"string", "int", "double", "bool"}.count(s.type) == 1);
    CHECK(names.insert(s.name).second);
    auto value = defaults.get(s.name);
    REQUIRE(value.ok());
    CHECK(*value == s.default_value);
  }
  CHECK(names.count("dataset_dir") == 1);
}

TEST_CASE("config: set parses values", "[core][config]") {
  Config c;
  REQUIRE(c.set("cpu_threads", "4").ok());
  CHECK(c.cpu_threads == 4);
  REQUIRE(c.set("loss_check_every", "-1").ok());
  CHECK(c.loss_check_every == -1);
  for (const char* t : {"1", "true", "yes", "on"}) {
    c.progress = false;
    REQUIRE(c.set("progress", t).ok());
    CHECK(c.progress);
  }
  for (const char* f : {"0", "false", "no", "off"}) {
    c.progress = true;
    REQUIRE(c.set("progress", f).ok());
    CHECK_FALSE(c.progress);
  }
  REQUIRE(c.set("log_dir", "/var/tmp/x").ok());
  CHECK(c.log_dir == "/var/tmp/x");
  REQUIRE(c.set_assignment("dataset_dir=/data/a=b").ok());  // only the first '=' splits
  CHECK(c.dataset_dir == "/data/a=b");
  CHECK(c.get("dataset_dir").value() == "/data/a=b");
}

TEST_CASE("config: bad values are invalid_argument naming setting and value", "[core][config]") {
  Config c;
  for (auto [name, value] : {std::pair<const char*, const char*>{"cpu_threads", "four"},
                             {"cpu_threads", "4x"},
                             {"cpu_threads", ""},
                             {"cpu_threads", "99999999999999999999999"},
                             {"progress", "maybe"}}) {
    INFO(name << "=" << value);
    Status s = c.set(name, value);
    CHECK(s.code() == Code::invalid_argument);
    CHECK_THAT(s.message(), Catch::Contains(std::string("'") + name + "'"));
    CHECK_THAT(s.message(), Catch::Contains(std::string("'") + value + "'"));
  }
  CHECK(c.cpu_threads == 1);  // unchanged by the failures
  CHECK(c.progress == true);
}

TEST_CASE("config: unknown names and malformed assignments", "[core][config]") {
  Config c;
  Status s = c.set("no_such_setting", "1");
  CHECK(s.code() == Code::invalid_argument);
  CHECK_THAT(s.message(), Catch::Contains("no_such_setting"));
  CHECK(c.get("no_such_setting").status().code() == Code::invalid_argument);
  CHECK(c.set_assignment("cpu_threads").code() == Code::invalid_argument);
  CHECK(c.set_assignment("=4").code() == Code::invalid_argument);
}

TEST_CASE("config: environment overrides TROUPE_<NAME>", "[core][config]") {
  ScopedEnv threads("TROUPE_CPU_THREADS", "3");
  ScopedEnv progress("TROUPE_PROGRESS", "off");
  ScopedEnv dir("TROUPE_DATASET_DIR", "/srv/fmnist");
  auto c = Config::from_environment();
  REQUIRE(c.ok());
  CHECK(c->cpu_threads == 3);
  CHECK(c->progress == false);
  CHECK(c->dataset_dir == "/srv/fmnist");
  CHECK(c->log_level == "info");  // not overridden
}

TEST_CASE("config: a bad environment value names the variable", "[core][config]") {
  ScopedEnv threads("TROUPE_CPU_THREADS", "many");
  auto c = Config::from_environment();
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == Code::invalid_argument);
  CHECK_THAT(c.status().message(), Catch::Contains("TROUPE_CPU_THREADS"));
  CHECK_THAT(c.status().message(), Catch::Contains("'many'"));
}

TEST_CASE("config: without environment variables, from_environment gives the defaults", "[core][config]") {
  for (const SettingInfo& s : Config::settings()) {
    std::string var = "TROUPE_";
    for (char ch : s.name) var += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    ::unsetenv(var.c_str());
  }
  auto c = Config::from_environment();
  REQUIRE(c.ok());
  Config defaults;
  for (const SettingInfo& s : Config::settings()) CHECK(c->get(s.name).value() == defaults.get(s.name).value());
}

}  // namespace troupe
