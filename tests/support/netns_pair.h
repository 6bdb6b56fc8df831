// Two "hosts" on one machine for tests: two network namespaces joined by a veth pair, each end
// with a test-only address. Needs root and iproute2; ok() is false (with error()) where namespaces
// cannot be made, and the tests that use it say so loudly and skip. Everything is deleted on
// destruction.
#pragma once

#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/support/run_command.h"

namespace troupe::testing {

// Two namespaces and the veth pair between them, deleted (with everything in them) on destruction.
class NetnsPair {
 public:
  // `tag` keeps names apart when several tests make pairs at once (interface names: <= 15 chars).
  NetnsPair(std::string host_a, std::string host_b, const std::string& tag = std::to_string(::getpid()))
      : host_a_(std::move(host_a)), host_b_(std::move(host_b)) {
    a_ = "troupeA-" + tag;
    b_ = "troupeB-" + tag;
    va_ = "trva" + tag;  // interface names: at most 15 characters
    vb_ = "trvb" + tag;
    const std::vector<std::string> steps = {
        "ip netns add " + a_,
        "ip netns add " + b_,
        "ip link add " + va_ + " netns " + a_ + " type veth peer name " + vb_ + " netns " + b_,
        "ip -n " + a_ + " addr add " + host_a_ + "/24 dev " + va_,
        "ip -n " + b_ + " addr add " + host_b_ + "/24 dev " + vb_,
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
  const std::string& host_a() const { return host_a_; }
  const std::string& host_b() const { return host_b_; }
  const std::string& ns_a() const { return a_; }
  const std::string& ns_b() const { return b_; }
  const std::string& dev_b() const { return vb_; }  // B's end of the veth pair (cut it: the link is down)

 private:
  std::string host_a_, host_b_;
  std::string a_, b_, va_, vb_, error_;
};

}  // namespace troupe::testing
