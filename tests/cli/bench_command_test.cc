// `troupe bench allreduce` end to end: the real binary starts real rank processes on loopback, as a
// user runs it. Results are checked for being present and right, never for speed.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "tests/support/run_command.h"

using troupe::testing::CommandResult;
using troupe::testing::run_command;
using troupe::testing::troupe_binary;

namespace {

CommandResult bench(const std::string& args) {
  return run_command("TROUPE_LOG_DIR=/tmp/troupe-test-logs " + troupe_binary() + " bench allreduce " + args);
}

// The checks every implementation's row must pass: the size asked for, checked, timed.
void check_case(const nlohmann::json& c, size_t bytes, size_t element_bytes) {
  INFO(c.dump());
  CHECK(c.at("bytes") == bytes);
  CHECK(c.at("count") == bytes / element_bytes);
  CHECK(c.at("wrong") == 0);
  CHECK(c.at("time_us").get<double>() > 0);
  CHECK(c.at("algbw_GBps").get<double>() > 0);
  CHECK(c.at("busbw_GBps").get<double>() > 0);
}

}  // namespace

TEST_CASE("troupe bench allreduce --json reports every size, checked", "[cli][bench]") {
  CommandResult r = bench("--ranks 2 --bytes 4K,1M --transport tcp --iters 3 --json --peers none");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);  // --json: stdout is one JSON document
  CHECK(j.at("ranks") == 2);
  CHECK(j.at("transport") == "tcp");
  CHECK(j.at("dtype") == "f32");
  CHECK(j.at("peers").empty());
  const auto& results = j.at("results");
  REQUIRE(results.size() == 2);
  const size_t sizes[] = {4096, 1 << 20};
  for (size_t k = 0; k < 2; ++k) {
    check_case(results[k], sizes[k], 4);
    CHECK(results[k].at("ranks") == 2);
    CHECK(results[k].at("iters") == 3);
    CHECK(results[k].at("peers").empty());
  }
}

TEST_CASE("troupe bench allreduce checks avg on bf16 over an odd number of ranks", "[cli][bench]") {
  CommandResult r = bench("--ranks 3 --bytes 6K --dtype bf16 --op avg --iters 2 --json --peers gloo");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  check_case(j.at("results").at(0), 6144, 2);
  // Gloo runs f32 only: it is reported as skipped, loudly, and the run goes on.
  CHECK(j.at("peers").at("gloo").at("status") == "skipped");
  CHECK(r.err.find("peer gloo skipped") != std::string::npos);
}

TEST_CASE("troupe bench allreduce runs Gloo and MPI on the same sizes, checked", "[cli][bench][peers]") {
  CommandResult r = bench("--ranks 2 --bytes 4K,1M --transport tcp --iters 3 --json");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  const struct {
    const char* name;
    bool built;
  } peers[] = {{"gloo", TROUPE_BENCH_GLOO != 0}, {"mpi", TROUPE_BENCH_MPI != 0}};
  for (const auto& p : peers) {
    INFO(p.name);
    const auto& status = j.at("peers").at(p.name);
    if (!p.built) {  // said loudly, and the run goes on
      CHECK(status.at("status") == "not built");
      CHECK(r.err.find(std::string("peer ") + p.name + " NOT BUILT") != std::string::npos);
      continue;
    }
    CHECK(status.at("status") == "ok");
    const size_t sizes[] = {4096, 1 << 20};
    for (size_t k = 0; k < 2; ++k) {
      const auto& row = j.at("results").at(k).at("peers").at(p.name);
      check_case(row, sizes[k], 4);
      CHECK(row.at("ratio").get<double>() > 0);
    }
  }
}

TEST_CASE("troupe bench allreduce refuses bad flags with a usage error naming the flag", "[cli][bench][errors]") {
  const struct {
    const char* args;
    const char* mentions;
  } cases[] = {
      {"--bytes 4X", "--bytes"},       {"--bytes 0", "--bytes"},     {"--bytes 6 --dtype f32", "--bytes"},
      {"--ranks 0", "--ranks"},        {"--ranks 65", "--ranks"},    {"--peers nccl", "--peers"},
      {"--dtype f64", "--dtype"},      {"--op min", "--op"},         {"--transport ib", "--transport"},
      {"--iters 0", "--iters"},        {"--frobnicate", "frobnicate"},
  };
  for (const auto& c : cases) {
    const std::string args = c.args;
    CommandResult r = bench(args.find("--peers") == std::string::npos ? args + " --peers none" : args);
    INFO(c.args << " -> exit " << r.exit_code << ": " << r.both());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(c.mentions) != std::string::npos);
  }
}

TEST_CASE("troupe bench allreduce names the rank that failed and stops the rest", "[cli][bench][errors]") {
  // Every rank refuses the unknown algorithm; the driver reports the first and exits with its code.
  CommandResult r = bench("--ranks 2 --bytes 4K --algorithm no_such --iters 1 --peers none");
  INFO(r.both());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("rank ") != std::string::npos);
  CHECK(r.err.find("no_such") != std::string::npos);
  // The driver keeps the ranks' logs after a failure and says where: remove them here.
  const size_t at = r.err.find("logs kept in /tmp/troupe-bench-");
  REQUIRE(at != std::string::npos);
  const std::string dir = r.err.substr(at + 13, r.err.find(')', at) - at - 13);
  CHECK(std::filesystem::exists(dir + "/troupe/rank-0.log"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("troupe bench allreduce over shared memory, the transport auto picks, checks every size", "[cli][bench]") {
  CommandResult r = bench("--ranks 3 --bytes 4K,1M --iters 3 --json --peers none");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("transport") == "shm");
  const auto& results = j.at("results");
  REQUIRE(results.size() == 2);
  check_case(results[0], 4096, 4);
  check_case(results[1], 1 << 20, 4);
  CHECK(results[1].at("transport") == "shm");
  CHECK(results[1].at("zero_copy") == true);  // buffers in the shared arena, as a trainer's gradients
}

TEST_CASE("troupe bench allreduce --staged all-reduces private buffers over shared memory", "[cli][bench]") {
  CommandResult r = bench("--ranks 2 --bytes 4K,1M --iters 3 --transport shm --staged --json --peers none");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  const auto& results = j.at("results");
  REQUIRE(results.size() == 2);
  check_case(results[0], 4096, 4);
  check_case(results[1], 1 << 20, 4);
  CHECK(results[1].at("zero_copy") == false);
  CHECK(j.at("command").get<std::string>().find("--staged") != std::string::npos);
}
