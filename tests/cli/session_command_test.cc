// The session directory and the commands that work from it alone: `troupe down` and `troupe logs`.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/session.h"
#include "core/process.h"
#include "tests/core/temp_dir.h"
#include "tests/support/run_command.h"

using namespace troupe;
using troupe::cli::ClusterInfo;
using troupe::cli::Session;
using troupe::testing::run_command;
using troupe::testing::TempDir;
using troupe::testing::troupe_binary;

namespace {
// A stand-in cluster process: a shell that sleeps, with its pid file in the session.
pid_t fake_process(const Session& s, const std::string& role) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo " + role + " started; exec sleep 60"};
  o.log_file = s.log_file(role);
  auto pid = spawn_process(o);
  REQUIRE(pid.ok());
  REQUIRE(write_pid_file(s.pid_file(role), *pid).ok());
  return *pid;
}
}  // namespace

TEST_CASE("cluster.json round trips and is private", "[cli][session]") {
  TempDir home;
  Session s(home.path());
  REQUIRE(s.create().ok());
  CHECK(s.read_cluster().status().code() == Code::not_found);
  CHECK(s.read_cluster().status().message().find("troupe up") != std::string::npos);
  ClusterInfo c;
  c.redis_port = 6390;
  c.redis_password = "secret";
  c.head_address = "127.0.0.1:4000";
  c.token = cli::random_token();
  c.version = "0.1.0";
  REQUIRE(s.write_cluster(c).ok());
  auto back = s.read_cluster();
  REQUIRE(back.ok());
  CHECK(back->redis_port == 6390);
  CHECK(back->token == c.token);
  CHECK(back->token.size() == 32);
  CHECK(back->token != cli::random_token());
  struct stat st {};
  REQUIRE(::stat(s.cluster_file().c_str(), &st) == 0);
  CHECK((st.st_mode & 0077) == 0);  // secrets: no access for group or others
  std::ofstream(s.cluster_file()) << "{\"redis_host\": 5}";
  auto bad = s.read_cluster();
  CHECK(bad.status().code() == Code::corrupt_data);
  CHECK(bad.status().message().find("cluster.json") != std::string::npos);
}

TEST_CASE("troupe down stops every process of the session and is safe to repeat", "[cli][down]") {
  TempDir home;
  Session s(home.path());
  REQUIRE(s.create().ok());
  pid_t redis = fake_process(s, "redis");
  pid_t head = fake_process(s, "head");
  pid_t node = fake_process(s, "node-1");
  REQUIRE(s.processes().size() == 3);
  auto r = run_command("TROUPE_HOME=" + home.path() + " " + troupe_binary() + " down");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("3 processes stopped") != std::string::npos);
  CHECK(!process_alive(redis));
  CHECK(!process_alive(head));
  CHECK(!process_alive(node));
  CHECK(s.processes().empty());
  CHECK(std::filesystem::exists(s.log_file("head")));  // logs are kept
  auto again = run_command("TROUPE_HOME=" + home.path() + " " + troupe_binary() + " down");
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("no cluster processes were running") != std::string::npos);
}

TEST_CASE("troupe logs lists the logs and prints the end of one", "[cli][logs]") {
  TempDir home;
  Session s(home.path());
  REQUIRE(s.create().ok());
  {
    std::ofstream f(s.log_file("head"));
    for (int i = 1; i <= 100; ++i) f << "line " << i << "\n";
  }
  std::ofstream(s.log_file("node-1")) << "node says hi\n";
  const std::string env = "TROUPE_HOME=" + home.path() + " ";
  auto list = run_command(env + troupe_binary() + " logs");
  REQUIRE(list.exit_code == 0);
  CHECK(list.out.find("head.log") != std::string::npos);
  CHECK(list.out.find("node-1.log") != std::string::npos);
  auto head = run_command(env + troupe_binary() + " logs head -n 3");
  REQUIRE(head.exit_code == 0);
  CHECK(head.out == "line 98\nline 99\nline 100\n");
  auto missing = run_command(env + troupe_binary() + " logs node-7");
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("node-1") != std::string::npos);  // says which logs exist
}
