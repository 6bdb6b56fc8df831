// Two hosts on one machine: network namespaces A and B joined by a veth pair, two ranks in each
// (troupe_collective_rank processes), a redis-server in A as the GCS. form_group sees two nodes of
// two members and picks the hierarchical transport: shared memory within a namespace, TCP over the
// veth between the two leaders. Needs root and iproute2; elsewhere the test says why and skips.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/process.h"
#include "tests/core/temp_dir.h"
#include "tests/support/netns_pair.h"

using namespace troupe;
using namespace troupe::testing;

namespace {

constexpr const char* kHostA = "10.231.9.1";
constexpr const char* kHostB = "10.231.9.2";

// The full path of `program` on PATH, or "" (spawn_process runs paths, not names).
std::string which(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (::access((dir + "/" + program).c_str(), X_OK) == 0) return dir + "/" + program;
  for (const char* dir : {"/usr/sbin", "/sbin"})
    if (::access((std::string(dir) + "/" + program).c_str(), X_OK) == 0) return std::string(dir) + "/" + program;
  return "";
}

std::string slurp_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Processes started in the namespaces; SIGKILLed and reaped on destruction.
class Processes {
 public:
  ~Processes() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      (void)wait_process(pid, std::chrono::milliseconds(2000));
    }
  }
  pid_t start(const std::vector<std::string>& argv, const std::string& log) {
    SpawnOptions o;
    o.argv = argv;
    o.log_file = log;
    o.detach = false;
    auto pid = spawn_process(o);
    REQUIRE(pid.ok());
    pids_.push_back(*pid);
    return *pid;
  }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace

TEST_CASE("netns: ranks on two hosts all-reduce hierarchically (shm within, TCP over the veth between)") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: the two-host test needs root to create network namespaces");
    return;
  }
  const std::string ip = which("ip");
  if (ip.empty()) {
    WARN("SKIPPED: the two-host test needs iproute2 (`ip`), which is not installed");
    return;
  }
  NetnsPair net(kHostA, kHostB, "c" + std::to_string(::getpid() % 100000));
  if (!net.ok()) {
    WARN("SKIPPED: cannot create network namespaces here: " << net.error());
    return;
  }
  REQUIRE(poll_until([&] { return net.link_up(); }, std::chrono::seconds(10)));

  TempDir dir;
  Processes procs;  // destroyed before `net`: nothing left running in the namespaces
  const std::string port = "6379", password = "netns-test-" + std::to_string(::getpid());
  procs.start({ip, "netns", "exec", net.ns_a(), "redis-server", "--port", port, "--bind", kHostA, "--save", "",
               "--appendonly", "no", "--requirepass", password},
              dir.path() + "/redis.log");
  REQUIRE(poll_until(
      [&] {
        return run_command(net.exec_in_a() + " redis-cli -h " + kHostA + " -p " + port + " -a " + password +
                               " --no-auth-warning ping",
                           5)
                   .out.find("PONG") != std::string::npos;
      },
      std::chrono::seconds(15)));

  const int world = 4;
  std::vector<std::string> logs;
  for (int r = 0; r < world; ++r) {
    const bool in_a = r < 2;
    logs.push_back(dir.path() + "/rank" + std::to_string(r) + ".log");
    procs.start({ip, "netns", "exec", in_a ? net.ns_a() : net.ns_b(), TROUPE_COLLECTIVE_RANK, "--redis-host", kHostA,
                 "--redis-port", port, "--password", password, "--prefix", "netns", "--group", "two_hosts",
                 "--generation", "0", "--rank", std::to_string(r), "--world", std::to_string(world), "--host",
                 in_a ? kHostA : kHostB, "--node", in_a ? "A" : "B", "--rounds", "3", "--count",
                 std::to_string(1 << 22), "--timeout-ms", "30000"},
                logs.back());
  }
  const bool done = poll_until(
      [&] {
        for (const auto& log : logs)
          if (slurp_file(log).find("round 3 ") == std::string::npos && slurp_file(log).find("error") == std::string::npos)
            return false;
        return true;
      },
      std::chrono::seconds(60));
  for (int r = 0; r < world; ++r) {
    const std::string log = slurp_file(logs[r]);
    INFO("rank " << r << ":\n" << log << "\nredis:\n" << slurp_file(dir.path() + "/redis.log"));
    CHECK(done);
    CHECK(log.find("formed 0 " + std::to_string(r) + " 4 hierarchical\n") != std::string::npos);
    CHECK(log.find("round 3 ok 10\n") != std::string::npos);  // 1 + 2 + 3 + 4 in every one of 4M elements
  }
}
