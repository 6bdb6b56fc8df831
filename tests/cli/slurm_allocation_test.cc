// What `troupe up --slurm` reads from Slurm's variables and from `scontrol show node -o`, and the srun
// command line that starts a node as a step. (The whole path runs against a real Slurm in
// tests/cluster/slurm_real_test.cc.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>

#include "cli/slurm_allocation.h"

using namespace troupe::cli;

TEST_CASE("slurm: SLURM_JOB_CPUS_PER_NODE expands to one count per node", "[cli][slurm]") {
  auto one = parse_cpus_per_node("4", 1);
  REQUIRE(one.ok());
  CHECK(*one == std::vector<double>{4});
  auto mixed = parse_cpus_per_node("2(x3),1,8(x2)", 6);
  REQUIRE(mixed.ok());
  CHECK(*mixed == std::vector<double>{2, 2, 2, 1, 8, 8});
}

TEST_CASE("slurm: a malformed SLURM_JOB_CPUS_PER_NODE is refused naming the variable and the value", "[cli][slurm]") {
  for (const char* bad : {"", "x", "2(x)", "2(3)", "2(x3", "0", "-1", "2(x0)", "2(x3)junk", "2,,1"}) {
    auto r = parse_cpus_per_node(bad, 1);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("SLURM_JOB_CPUS_PER_NODE='" + std::string(bad) + "'") != std::string::npos);
  }
  auto wrong_count = parse_cpus_per_node("2(x3)", 2);
  REQUIRE_FALSE(wrong_count.ok());
  CHECK(wrong_count.status().message().find("counts 3 nodes, the allocation has 2") != std::string::npos);
}

TEST_CASE("slurm: node addresses come from scontrol show node -o, the name when none is set", "[cli][slurm]") {
  const std::string shown =
      "NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=2 CPUTot=2 NodeAddr=10.0.0.1 NodeHostName=n1 Version=22.05.8\n"
      "NodeName=gpu-07 Arch=x86_64 CPUTot=64 Gres=gpu:a100:8 NodeAddr=gpu-07.cluster NodeHostName=gpu-07\n"
      "NodeName=n3 CPUTot=2\n";
  auto a = parse_node_addresses(shown);
  CHECK(a.size() == 3);
  CHECK(a["n1"] == "10.0.0.1");
  CHECK(a["gpu-07"] == "gpu-07.cluster");
  CHECK(a["n3"] == "n3");
}

TEST_CASE("slurm: a node is started as an overlapping step of the allocation, the token not on its command line",
          "[cli][slurm]") {
  SlurmAllocation a;
  a.job_id = "42";
  a.nodes = {{"n1", "10.0.0.1", 4}, {"n2", "10.0.0.2", 8}};
  auto argv = srun_node_command(a, a.nodes[1], "/opt/troupe/bin/troupe", "10.0.0.1:7000");
  const std::vector<std::string> want{"srun", "--overlap", "--jobid=42", "--nodes=1", "--ntasks=1", "--nodelist=n2",
                                      "--cpus-per-task=8", "--kill-on-bad-exit=0", "--job-name=troupe-node-n2",
                                      "/opt/troupe/bin/troupe", "node", "--address", "10.0.0.1:7000", "--bind",
                                      "10.0.0.2", "--cpus", "8"};
  CHECK(argv == want);
  CHECK(std::none_of(argv.begin(), argv.end(), [](const std::string& s) { return s.find("token") != std::string::npos; }));
}

TEST_CASE("slurm: outside an allocation --slurm says where to run it", "[cli][slurm]") {
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_JOB_NODELIST");
  auto a = read_slurm_allocation();
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message().find("not inside a Slurm allocation") != std::string::npos);
  CHECK(a.status().message().find("examples/slurm/train.sbatch") != std::string::npos);
}

TEST_CASE("slurm: a command that fails is named with its exit and output", "[cli][slurm]") {
  auto r = run_for_output({"sh", "-c", "echo nope; exit 3"}, std::chrono::seconds(10));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("exited 3: nope") != std::string::npos);
  auto ok = run_for_output({"echo", "hello"}, std::chrono::seconds(10));
  REQUIRE(ok.ok());
  CHECK(*ok == "hello\n");
}
