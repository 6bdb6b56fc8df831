// `troupe up --slurm` on a real Slurm cluster (Debian's slurmctld, slurmd and munged; two nodes in
// two network namespaces, tests/support/slurm_cluster.h), as an operator uses it: the sbatch example
// brings troupe up on a two-node allocation, trains a job across both nodes to a saved model and takes
// it down; `troupe down` stops a node that does not answer through Slurm; the allocation's end
// (scancel) stops the head, the GCS and every node. Skips loudly where Slurm cannot run.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "tests/core/temp_dir.h"
#include "tests/support/run_command.h"
#include "tests/support/slurm_cluster.h"

using namespace troupe::testing;

namespace {

// The head's host:port that `troupe up` printed ("  head:       10.0.0.1:4000 (pid 12)"), or "".
std::string head_address(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(head: +([0-9.]+:[0-9]+))")) ? m[1].str() : "";
}

// Pids of the processes whose command line contains `needle`, pgrep and sh excluded.
std::set<pid_t> processes_with(const std::string& needle) {
  std::set<pid_t> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp(e.path().string() + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos && cmd.find("sh -c") == std::string::npos) pids.insert(std::stoi(name));
  }
  return pids;
}

// True once every pid is gone (zombies count as gone) within `timeout_s`.
bool all_gone(const std::set<pid_t>& pids, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    bool any = false;
    for (pid_t p : pids) {
      const std::string stat = slurp("/proc/" + std::to_string(p) + "/stat");
      any = any || (!stat.empty() && stat.find(") Z") == std::string::npos);
    }
    if (!any) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Submits `script` with `sbatch -N2 -c2`, output to `out`; the job id.
std::string sbatch(const SlurmCluster& slurm, const std::string& env, const std::string& script, const std::string& out) {
  auto r = slurm.run("env " + env + " sbatch --parsable -N2 -c2 -o " + out + " " + script, 30);
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  std::string id = r.out.substr(0, r.out.find_first_of(";\n"));
  REQUIRE(!id.empty());
  return id;
}

bool slurm_usable(const SlurmCluster& slurm) {
  if (slurm.unavailable().empty()) return true;
  WARN("SKIPPED: the real-Slurm test cannot run: " << slurm.unavailable());
  return false;
}

}  // namespace

TEST_CASE("slurm: the sbatch example brings troupe up on two nodes, trains across both to a model and takes it down",
          "[cluster][slurm]") {
  TempDir dir(std::string(TROUPE_BINARY_DIR) + "/test-homes");
  SlurmCluster slurm(dir.path() + "/slurm");
  if (!slurm_usable(slurm)) return;
  const std::string model = dir.path() + "/model.safetensors";
  const std::string out = dir.path() + "/train.out";
  const std::string id = sbatch(slurm,
                                "TROUPE=" + troupe_binary() + " TROUPE_HOME=" + dir.path() + "/home MODEL=" + model +
                                    " EPOCHS=1",
                                std::string(TROUPE_SOURCE_DIR) + "/examples/slurm/train.sbatch", out);
  const std::string state = slurm.wait_job(id, 300);
  const std::string text = slurp(out);
  INFO("job " << id << " " << state << "; its output:\n" << text << "\nslurmd-n2.log:\n" << slurp(slurm.dir() + "/slurmd-n2.log"));
  REQUIRE(state == "COMPLETED");
  CHECK(text.find("troupe cluster (Slurm job " + id + ") up in") != std::string::npos);
  CHECK(text.find("head + 1 node ALIVE") != std::string::npos);
  // The head on n1, the other node on n2, each offering the 2 CPUs of its allocation.
  CHECK(text.find("head:       " + slurm.net().host_a() + ":") != std::string::npos);
  CHECK(std::regex_search(text, std::regex("ALIVE +" + slurm.net().host_b() + ":[0-9]+ +0/2 ")));
  std::smatch acc;
  REQUIRE(std::regex_search(text, acc, std::regex(R"(test accuracy ([0-9.]+))")));
  CHECK(std::stod(acc[1].str()) >= 0.80);
  CHECK(std::filesystem::file_size(model) > 900000);  // 235,146 f32 parameters
  CHECK(text.find("trained model: " + model) != std::string::npos);
  CHECK(text.find("cluster down") != std::string::npos);
  const std::string head = head_address(text);
  REQUIRE(!head.empty());
  CHECK(all_gone(processes_with("--address " + head), 15));
}

TEST_CASE("slurm: down stops a frozen node through Slurm, and the allocation's end stops the whole cluster",
          "[cluster][slurm]") {
  TempDir dir(std::string(TROUPE_BINARY_DIR) + "/test-homes");
  SlurmCluster slurm(dir.path() + "/slurm");
  if (!slurm_usable(slurm)) return;
  const std::string env = "TROUPE=" + troupe_binary() + " TROUPE_HOME=" + dir.path() + "/home";

  SECTION("a node that does not answer the head is killed as a step of the allocation; up elsewhere is refused") {
    const std::string script = dir.path() + "/frozen.sh";
    std::ofstream(script) << "#!/bin/bash\nsrun --overlap -N1 -n1 -w n2 \"$TROUPE\" up --slurm\necho \"on n2 exit $?\"\n"
                             "\"$TROUPE\" up --slurm --timeout 60 || exit 1\n"
                             "H=$(grep -o '\"head_address\": *\"[^\"]*\"' \"$TROUPE_HOME/session/cluster.json\" | cut -d'\"' -f4)\n"
                             "pkill -STOP -f \"^[^ ]*troupe node --address $H\"\n\"$TROUPE\" down\necho \"down exit $?\"\n";
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    const std::string out = dir.path() + "/frozen.out";
    const std::string id = sbatch(slurm, env, script, out);
    const std::string state = slurm.wait_job(id, 120);
    const std::string text = slurp(out);
    INFO("job " << id << " " << state << "; its output:\n" << text);
    REQUIRE(state == "COMPLETED");
    CHECK(std::regex_search(text, std::regex("stopped node [0-9a-f]+ at " + slurm.net().host_b() +
                                             ":[0-9]+ \\(pid [0-9]+\\) through Slurm: scancel --signal=KILL")));
    CHECK(text.find("down exit 0") != std::string::npos);
    // Not on the allocation's first node: refused, saying where the head goes.
    CHECK(text.find("the head runs on the allocation's first node, n1, but this process runs on node n2") !=
          std::string::npos);
    CHECK(text.find("on n2 exit 2") != std::string::npos);  // a usage error
    const std::string head = head_address(text);
    REQUIRE(!head.empty());
    CHECK(all_gone(processes_with("--address " + head), 15));
  }

  SECTION("scancel of the allocation ends the head, its GCS and the nodes") {
    if (!slurm.tracks_every_process()) {
      WARN("SKIPPED: cgroup v1's freezer is not mounted here, so Slurm runs with proctrack/linuxproc, which does "
           "not end processes that left their parent (the head and its GCS); sites run proctrack/cgroup");
      return;
    }
    const std::string script = dir.path() + "/hold.sh";
    std::ofstream(script) << "#!/bin/bash\n\"$TROUPE\" up --slurm --timeout 60 || exit 1\nsleep 600\n";
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    const std::string out = dir.path() + "/hold.out";
    const std::string id = sbatch(slurm, env, script, out);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (slurp(out).find("dashboard:") == std::string::npos && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::string text = slurp(out);
    INFO("job " << id << "'s output:\n" << text);
    const std::string head = head_address(text);
    REQUIRE(!head.empty());
    std::set<pid_t> pids = processes_with("--address " + head);  // the node on n2 and its srun
    const std::string pid_dir = dir.path() + "/home/session/pids/";
    for (const char* role : {"head", "redis"}) {
      std::ifstream f(pid_dir + role + ".pid");
      pid_t pid = 0;
      REQUIRE(f >> pid);
      pids.insert(pid);
    }
    REQUIRE(pids.size() >= 4);
    REQUIRE(slurm.run("scancel " + id, 20).exit_code == 0);
    CHECK(all_gone(pids, 30));
    for (pid_t p : pids) ::kill(p, SIGKILL);  // never leave one behind, whatever the check said
  }
}
