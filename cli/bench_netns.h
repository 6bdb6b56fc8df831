// `troupe bench allreduce --netns`: two "hosts" on this machine — network namespaces A and B joined
// by a veth pair — with half the ranks in each, and the link's own bandwidth measured by iperf3 in
// the same invocation, so the all-reduce's busbw can be quoted as a fraction of what the link
// carries. Needs root, iproute2 (`ip`) and iperf3; every failure says which command failed.
//
//   auto hosts = NetnsHosts::create();          // namespaces, veth, addresses; deleted on destruction
//   auto link = measure_link(*hosts, 3, dir);   // iperf3 server in B, client in A
//   argv = hosts->exec_prefix(rank_host) + argv  // {"ip", "netns", "exec", "<ns>"} + the rank's argv
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::cli {

// Two namespaces and the veth pair between them (10.<...>.1 in A, .2 in B, a /24 private to this
// run). The destructor deletes both namespaces, and with them the veth pair and every socket in
// them, whatever happened in between.
class NetnsHosts {
 public:
  // Fails with a message naming the `ip` command that failed (or: not root, no `ip`).
  static Expected<std::unique_ptr<NetnsHosts>> create();
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  // host 0 is namespace A, host 1 is B.
  const std::string& address(int host) const { return address_[host]; }
  const std::string& name(int host) const { return ns_[host]; }
  // The argv prefix that runs a program in host `host`'s namespace.
  std::vector<std::string> exec_prefix(int host) const;

 private:
  NetnsHosts() = default;
  std::string ip_;  // path of `ip`
  std::string ns_[2], veth_[2], address_[2];
  bool created_[2] = {false, false};
};

// What iperf3 measured between A and B, in Gbit/s (1e9 bit/s) at the receiver.
struct LinkBandwidth {
  double one_way = 0;  // A -> B alone (`iperf3 -c B -t seconds`)
  // Each direction while both run at once (`--bidir`), the mean of the two: what a link carries
  // per direction when every rank sends and receives together, as in an all-reduce. On a veth the
  // "wire" is the CPU that copies, shared by both directions, so this is well below one_way.
  double bidir = 0;
};

// Runs iperf3 twice (one-way, then --bidir), `seconds` each, server in B and client in A, their
// output in `log_dir`. Fails naming iperf3's output when it is missing, cannot connect or prints
// no result.
Expected<LinkBandwidth> measure_link(const NetnsHosts& hosts, int seconds, const std::string& log_dir);

// The host (0 or 1) of rank r of `ranks`: the first half in A, the rest in B (ranks of one host
// keep consecutive numbers, so the lowest of each is its leader in a hierarchical group).
inline int netns_host_of(int rank, int ranks) { return rank < (ranks + 1) / 2 ? 0 : 1; }

}  // namespace troupe::cli
