// Child processes of the cluster CLI (core/process.h), with real programs.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/process.h"
#include "tests/core/temp_dir.h"

using namespace troupe;
using troupe::testing::TempDir;

namespace {
std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("a detached child runs, logs to its file, and is stopped", "[core][process]") {
  TempDir dir;
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo started $TROUPE_PROCESS_TEST; exec sleep 30"};
  o.log_file = dir.file("child.log");
  o.env = {"TROUPE_PROCESS_TEST=yes"};
  auto pid = spawn_process(o);
  REQUIRE(pid.ok());
  CHECK(process_alive(*pid));
  // The child writes its line shortly after it starts.
  for (int i = 0; i < 200 && read_file(o.log_file).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(read_file(o.log_file) == "started yes\n");
  REQUIRE(stop_process(*pid, std::chrono::milliseconds(2000)).ok());
  CHECK(!process_alive(*pid));
  CHECK(stop_process(*pid, std::chrono::milliseconds(100)).ok());  // stopping a gone process is fine
}

TEST_CASE("a child that ignores SIGTERM is killed after the grace period", "[core][process]") {
  TempDir dir;
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "trap '' TERM; while true; do sleep 1; done"};
  o.log_file = dir.file("stubborn.log");
  auto pid = spawn_process(o);
  REQUIRE(pid.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the shell install its trap
  REQUIRE(stop_process(*pid, std::chrono::milliseconds(300)).ok());
  CHECK(!process_alive(*pid));
}

TEST_CASE("a program that cannot be executed is an error naming it", "[core][process]") {
  TempDir dir;
  SpawnOptions o;
  o.argv = {"/nonexistent/troupe-binary", "node"};
  o.log_file = dir.file("x.log");
  auto pid = spawn_process(o);
  REQUIRE(!pid.ok());
  CHECK(pid.status().code() == Code::io_error);
  CHECK(pid.status().message().find("/nonexistent/troupe-binary") != std::string::npos);
  o.argv = {"/bin/true"};
  o.log_file = "/nonexistent-dir/x.log";
  auto bad_log = spawn_process(o);
  REQUIRE(!bad_log.ok());
  CHECK(bad_log.status().message().find("/nonexistent-dir/x.log") != std::string::npos);
}

TEST_CASE("a program named without a '/' is found on PATH, as a shell would (an ssh provider's `ssh`)", "[core][process]") {
  TempDir dir;
  SpawnOptions o;
  o.argv = {"sh", "-c", "echo via-path"};
  o.log_file = dir.file("path.log");
  auto pid = spawn_process(o);
  REQUIRE(pid.ok());
  REQUIRE(wait_process(*pid, std::chrono::seconds(10)).ok());
  CHECK(read_file(o.log_file) == "via-path\n");
  auto sh = find_program("sh");
  REQUIRE(sh.ok());
  CHECK(sh->find('/') != std::string::npos);
  CHECK(*find_program("/bin/true") == "/bin/true");
  auto missing = find_program("troupe-no-such-program");
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == Code::not_found);
  CHECK(missing.status().message().find("cannot find 'troupe-no-such-program' on PATH") != std::string::npos);
  o.argv = {"troupe-no-such-program"};
  auto not_found = spawn_process(o);
  REQUIRE(!not_found.ok());
  CHECK(not_found.status().message().find("troupe-no-such-program") != std::string::npos);
}

TEST_CASE("pid files round trip and bad ones are named", "[core][process]") {
  TempDir dir;
  REQUIRE(write_pid_file(dir.file("a.pid"), 4242).ok());
  auto pid = read_pid_file(dir.file("a.pid"));
  REQUIRE(pid.ok());
  CHECK(*pid == 4242);
  CHECK(read_pid_file(dir.file("missing.pid")).status().code() == Code::not_found);
  std::ofstream(dir.file("bad.pid")) << "not a pid\n";
  auto bad = read_pid_file(dir.file("bad.pid"));
  CHECK(bad.status().code() == Code::corrupt_data);
  CHECK(bad.status().message().find("bad.pid") != std::string::npos);
  CHECK(!process_alive(0));
  CHECK(self_executable().find("troupe_core_tests") != std::string::npos);
}
