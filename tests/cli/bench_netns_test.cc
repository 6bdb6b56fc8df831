// `troupe bench allreduce --netns` end to end: two network namespaces joined by a veth, ranks in
// both, iperf3 measuring the link. Needs root, iproute2 and iperf3; elsewhere it says why, loudly,
// and skips. Results are checked for being present and right, never for speed.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"

using troupe::testing::CommandResult;
using troupe::testing::run_command;
using troupe::testing::troupe_binary;

namespace {

// Why --netns cannot run here, or "" when it can.
std::string missing_prerequisite() {
  if (::geteuid() != 0) return "--netns needs root to create network namespaces";
  for (const char* tool : {"ip", "iperf3"}) {
    const std::string probe = std::string("PATH=$PATH:/usr/sbin:/sbin command -v ") + tool;
    if (run_command(probe, 10).exit_code != 0) return std::string("--netns needs `") + tool + "`, not installed";
  }
  return "";
}

}  // namespace

TEST_CASE("troupe bench allreduce --netns runs ranks on two namespaces and measures the link", "[cli][bench][netns]") {
  const std::string why = missing_prerequisite();
  if (!why.empty()) {
    WARN("SKIPPED: " << why);
    return;
  }
  for (int ranks : {2, 4}) {  // 4: two per namespace, a hierarchical group
    INFO(ranks << " ranks");
    CommandResult r = run_command("PATH=$PATH:/usr/sbin:/sbin " + troupe_binary() + " bench allreduce --netns --ranks " +
                                      std::to_string(ranks) + " --bytes 1M --iters 3 --iperf-seconds 1 --peers gloo --json",
                                  240);
    INFO(r.both());
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.out);  // --json: stdout is one JSON document
    CHECK(j.at("transport") == (ranks == 2 ? "tcp" : "hierarchical"));
    CHECK(j.at("netns").at("link_gbps").get<double>() > 0);
    CHECK(j.at("netns").at("link_bidir_gbps").get<double>() > 0);
    const auto& row = j.at("results").at(0);
    CHECK(row.at("bytes") == 1 << 20);
    CHECK(row.at("wrong") == 0);
    CHECK(row.at("time_us").get<double>() > 0);
    CHECK(row.at("link_ratio").get<double>() > 0);
    // Gloo runs across the namespaces too when this build has it.
    if (j.at("peers").at("gloo").at("status") == "ok") CHECK(row.at("peers").at("gloo").at("wrong") == 0);
    CHECK_FALSE(j.at("peers").contains("mpi"));  // not asked for
  }
}

TEST_CASE("troupe bench allreduce --netns refuses the shm transport with a usage error", "[cli][bench][netns][errors]") {
  CommandResult r = run_command(troupe_binary() + " bench allreduce --netns --transport shm --bytes 4K --peers none");
  INFO(r.both());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--netns") != std::string::npos);
}
