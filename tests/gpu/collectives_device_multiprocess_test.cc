// Device collectives with one rank per process, as jobs run them: this binary re-runs itself as each
// rank (device_rank.h), the group forms through a real redis-server. Staged: two processes sharing
// GPU 0 over shared memory. NCCL: two processes on two GPUs all-reduce; on one GPU NCCL refuses
// them, which must reach both processes as an error with the advice (the all-reduce is then skipped,
// loudly).
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "collectives/device_communicator.h"
#include "core/process.h"
#include "tests/core/temp_dir.h"
#include "tests/gcs/redis_fixture.h"

using namespace troupe;

namespace {

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

// The rank processes of one test and their stdout logs; SIGKILLs what is left when it goes away.
class DeviceRanks {
 public:
  explicit DeviceRanks(std::string prefix) : prefix_(std::move(prefix)) {
    server_ = &gcs::testing::shared_redis();
    store_ = gcs::testing::connect_store(*server_, prefix_);  // cleans the prefix
  }
  ~DeviceRanks() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      (void)wait_process(pid, std::chrono::milliseconds(2000));
    }
  }

  void start(const std::vector<std::string>& args) {
    SpawnOptions o;
    o.argv = {self_path(), "--device-rank", "--redis-port", std::to_string(server_->port()), "--password",
              server_->password(), "--prefix", prefix_};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.log_file = dir_.path() + "/rank" + std::to_string(pids_.size()) + ".log";
    o.detach = false;
    auto pid = spawn_process(o);
    REQUIRE(pid.ok());
    pids_.push_back(*pid);
    logs_.push_back(o.log_file);
  }

  std::string log(size_t i) const {
    std::ifstream in(logs_[i]);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Waits for process i (at most 60 s); its exit code.
  int wait(size_t i) {
    auto code = wait_process(pids_[i], std::chrono::seconds(60));
    INFO("rank process " << i << ": " << log(i));
    REQUIRE(code.ok());
    return *code;
  }

 private:
  std::string prefix_;
  gcs::RedisServer* server_;
  std::unique_ptr<gcs::RedisStore> store_;
  troupe::testing::TempDir dir_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
};

std::vector<std::string> rank_args(const std::string& path, const std::string& group, int rank, int world,
                                   int device) {
  return {"--path", path, "--group", group, "--rank", std::to_string(rank), "--world", std::to_string(world),
          "--device", std::to_string(device)};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

}  // namespace

TEST_CASE("device collectives (staged, processes): two processes sharing the GPU all-reduce over shared memory") {
  DeviceRanks ranks("gpu_staged_mp");
  for (int r = 0; r < 2; ++r) ranks.start(rank_args("staged", "staged2", r, 2, 0));
  for (size_t r = 0; r < 2; ++r) {
    const int code = ranks.wait(r);
    INFO("rank " << r << ": " << ranks.log(r));
    CHECK(code == 0);
    CHECK(ranks.log(r).find("formed staged(shm)") != std::string::npos);
    CHECK(ranks.log(r).find("ok 3") != std::string::npos);
  }
}

TEST_CASE("device collectives (nccl, processes): two processes all-reduce on two GPUs, are refused on one") {
  if (!collectives::built_with_nccl()) {
    WARN("SKIPPED: this build has no NCCL");
    return;
  }
  const bool shared = device_count() < 2;
  DeviceRanks ranks("gpu_nccl_mp");
  for (int r = 0; r < 2; ++r) ranks.start(rank_args("nccl", "nccl2p", r, 2, shared ? 0 : r));
  std::vector<int> code(2);
  for (size_t r = 0; r < 2; ++r) code[r] = ranks.wait(r);
  if (shared)
    WARN("SKIPPED: a two-process NCCL all-reduce needs two GPUs; checked instead that NCCL's refusal of two "
         "processes on one GPU reaches both: rank 0: "
         << ranks.log(0) << "rank 1: " << ranks.log(1));
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << ranks.log(r));
    if (shared) {
      CHECK(code[r] == 1);
      CHECK(ranks.log(r).find("error invalid_argument") != std::string::npos);
      CHECK(ranks.log(r).find("NCCL refuses two ranks on one GPU") != std::string::npos);
    } else {
      CHECK(code[r] == 0);
      CHECK(ranks.log(r).find("formed nccl") != std::string::npos);
      CHECK(ranks.log(r).find("ok 3") != std::string::npos);
    }
  }
}

// Timing, not run by default (hidden tag): `troupe_gpu_tests "[.bench]"`. f32 all-reduce (sum, in
// place) with two processes on one node (shared memory): staged on device buffers of GPU 0, and the
// host all-reduce alone on host buffers (what staging adds is the difference); each process reports
// the median of 20 calls after 3 warm-ups, the slower process counts; every size checked first.
TEST_CASE("device collectives (processes): all-reduce timing, staged over shared memory and its host baseline",
          "[.bench]") {
  std::printf("%-16s %5s %12s %10s %8s %8s\n", "path", "ranks", "bytes", "time(us)", "algbw", "busbw");
  int case_id = 0;
  for (const char* path : {"staged", "host"})
    for (size_t bytes : {size_t{1} << 20, size_t{16} << 20, size_t{64} << 20, size_t{256} << 20}) {
      DeviceRanks ranks("gpu_bench_mp");
      const std::string group = "bench" + std::to_string(case_id++);
      for (int r = 0; r < 2; ++r)
        ranks.start(rank_args(path, group, r, 2, 0) +
                    std::vector<std::string>{"--count", std::to_string(bytes / 4), "--iterations", "20"});
      double us = 0;
      std::string formed;
      for (size_t r = 0; r < 2; ++r) {
        REQUIRE(ranks.wait(r) == 0);
        std::istringstream in(ranks.log(r));
        for (std::string line; std::getline(in, line);) {
          if (line.rfind("time ", 0) == 0) us = std::max(us, std::stod(line.substr(5)));
          if (line.rfind("formed ", 0) == 0) formed = line.substr(7);
        }
      }
      REQUIRE(us > 0);
      const double algbw = bytes / (us * 1e-6) / 1e9;
      std::printf("%-16s %5d %12zu %10.1f %8.2f %8.2f\n", formed.c_str(), 2, bytes, us, algbw, algbw);
      std::fflush(stdout);
    }
}
