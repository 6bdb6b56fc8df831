// Two hosts on one machine: two network namespaces joined by a veth pair (10.231.7.1/24 and
// 10.231.7.2/24, test-only addresses), a cluster up in the first and a node joining it from the
// second over the "network". Needs root and iproute2; where namespaces cannot be made the test
// says so loudly and passes.
#include <catch2/catch.hpp>

#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

namespace {

constexpr const char* kHostA = "10.231.7.1";
constexpr const char* kHostB = "10.231.7.2";

// Two namespaces and the veth pair between them, deleted (with everything in them) on destruction.
class NetnsPair {
 public:
  NetnsPair() {
    const std::string tag = std::to_string(::getpid());
    a_ = "troupeA-" + tag;
    b_ = "troupeB-" + tag;
    va_ = "trva" + tag;  // interface names: at most 15 characters
    vb_ = "trvb" + tag;
    const std::vector<std::string> steps = {
        "ip netns add " + a_,
        "ip netns add " + b_,
        "ip link add " + va_ + " netns " + a_ + " type veth peer name " + vb_ + " netns " + b_,
        "ip -n " + a_ + " addr add " + kHostA + "/24 dev " + va_,
        "ip -n " + b_ + " addr add " + kHostB + "/24 dev " + vb_,
        "ip -n " + a_ + " link set lo up",
        "ip -n " + b_ + " link set lo up",
        "ip -n " + a_ + " link set " + va_ + " up",
        "ip -n " + b_ + " link set " + vb_ + " up",
    };
    for (const std::string& step : steps) {
      auto r = run_command(step, 20);
      if (r.exit_code != 0) {
        error_ = "`" + step + "` failed (exit " + std::to_string(r.exit_code) + "): " + r.both();
        return;
      }
    }
  }
  ~NetnsPair() {
    // Deleting a namespace deletes its end of the veth pair, and with it the other end.
    run_command("ip netns del " + a_ + " 2>/dev/null; ip netns del " + b_ + " 2>/dev/null; true", 20);
  }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // True when both ends of the veth pair have a carrier (state UP).
  bool link_up() const {
    for (const auto& [ns, dev] : {std::pair{a_, va_}, std::pair{b_, vb_}}) {
      auto r = run_command("ip -n " + ns + " link show " + dev, 10);
      if (r.exit_code != 0 || r.out.find("NO-CARRIER") != std::string::npos ||
          r.out.find("state UP") == std::string::npos) {
        return false;
      }
    }
    return true;
  }
  std::string exec_in_a() const { return "ip netns exec " + a_; }
  std::string exec_in_b() const { return "ip netns exec " + b_; }

 private:
  std::string a_, b_, va_, vb_, error_;
};

}  // namespace

TEST_CASE("a node in another network namespace joins a head over a veth pair", "[cluster]") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: two-host test needs root to create network namespaces");
    return;
  }
  if (run_command("ip -V", 10).exit_code != 0) {
    WARN("SKIPPED: two-host test needs iproute2 (`ip`), which is not installed");
    return;
  }
  NetnsPair net;  // declared first: destroyed after both clusters are down
  if (!net.ok()) {
    WARN("SKIPPED: cannot create network namespaces here: " << net.error());
    return;
  }
  // A fresh veth pair reports NO-CARRIER for a moment: wait until both ends are up.
  REQUIRE(poll_until([&] { return net.link_up(); }, std::chrono::seconds(10)));

  ClusterFixture a(net.exec_in_a());
  ClusterFixture b(net.exec_in_b());
  a.up(std::string("--bind ") + kHostA + " --cpus 1");
  const Json info = a.cluster_file();
  INFO("cluster.json of A: " << info.dump());
  CHECK(info.at("head_address").get<std::string>().rfind(std::string(kHostA) + ":", 0) == 0);
  // The GCS must be reachable from the other host, so the embedded redis listens on --bind too.
  CHECK(info.at("redis_host") == kHostA);

  auto join = b.troupe("up --address " + info.at("head_address").get<std::string>() + " --token " +
                           info.at("token").get<std::string>() + " --bind " + kHostB + " --cpus 1 --timeout 30",
                       60);
  INFO("join from B:\n" << join.both() << "\nlogs of A:" << a.logs_tail() << "\nlogs of B:" << b.logs_tail());
  REQUIRE(join.exit_code == 0);

  Json view;
  const bool both_alive = poll_until(
      [&] {
        view = a.status();
        return nodes_in_state(view, "ALIVE").size() == 2;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(200));
  INFO("nodes: " << view.at("nodes").dump(2));
  REQUIRE(both_alive);
  bool remote = false;
  for (const Json& n : view.at("nodes")) {
    const std::string address = n.at("address");
    if (address.rfind(std::string(kHostB) + ":", 0) == 0) {
      remote = true;
      CHECK(!n.at("is_head").get<bool>());
    }
  }
  CHECK(remote);
}
