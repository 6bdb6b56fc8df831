#include "collectives/group_transport.h"

#include <algorithm>
#include <cstdint>

#include "collectives/hierarchical_transport.h"
#include "collectives/shm_transport.h"

namespace troupe::collectives {
namespace {

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(std::chrono::milliseconds(1), left);
}

std::string address_host(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

// The shared-memory segment of one formation of the group on one host. Rank 0's address carries a
// port the kernel picked for this formation, so two groups (or two clusters) that reuse a name and
// generation on one machine never open each other's segment.
// FNV-1a rather than std::hash: every member computes the name, and they need not share a build of
// the standard library.
std::string segment_name(const GroupOptions& o, const std::vector<gcs::GroupMember>& members, int host) {
  uint64_t h = 1469598103934665603ull;
  for (char c : members[0].address + "|" + o.name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return "troupe." + std::to_string(o.generation) + "." + std::to_string(host) + "." + std::to_string(h % 1000000007);
}

}  // namespace

std::vector<int> host_layout(const std::vector<gcs::GroupMember>& members) {
  std::vector<std::string> keys;
  std::vector<int> layout;
  for (const auto& m : members) {
    const std::string key = m.node.nil() ? "addr:" + address_host(m.address) : "node:" + m.node.hex();
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      layout.push_back(static_cast<int>(keys.size()) - 1);
    } else {
      layout.push_back(static_cast<int>(it - keys.begin()));
    }
  }
  return layout;
}

Expected<std::string> choose_group_transport(const std::string& requested, const std::vector<int>& host_of_rank) {
  const int hosts = host_of_rank.empty() ? 0 : *std::max_element(host_of_rank.begin(), host_of_rank.end()) + 1;
  const bool one_host = hosts <= 1;
  const bool one_per_host = hosts == static_cast<int>(host_of_rank.size());
  if (requested == "auto" || requested.empty()) {
    if (host_of_rank.size() <= 1 || one_per_host) return std::string("tcp");
    return std::string(one_host ? "shm" : "hierarchical");
  }
  if (requested == "tcp" || requested == "hierarchical") return requested;
  if (requested == "shm") {
    if (!one_host)
      return invalid_argument("transport shm needs every member on one node; the members are on " +
                              std::to_string(hosts) + " nodes (use auto, tcp or hierarchical)");
    return requested;
  }
  return invalid_argument("unknown transport '" + requested + "'; choose auto, shm, tcp or hierarchical");
}

Expected<std::unique_ptr<Transport>> connect_group_transport(const GroupOptions& o,
                                                            const std::vector<gcs::GroupMember>& members,
                                                            TcpListener listener, Clock::time_point deadline) {
  const std::vector<int> hosts = host_layout(members);
  auto kind = choose_group_transport(o.transport, hosts);
  if (!kind) return kind.status();

  // This member's host group: its index among the members on its host, and their count.
  int local_rank = 0, local_size = 0;
  std::vector<int> global_ranks;  // errors of the host's shm group name the group's ranks
  for (int r = 0; r < static_cast<int>(members.size()); ++r)
    if (hosts[r] == hosts[o.rank]) {
      if (r < o.rank) ++local_rank;
      ++local_size;
      global_ranks.push_back(r);
    }
  auto connect_local = [&]() {
    ShmGroupOptions shm;
    shm.name = segment_name(o, members, hosts[o.rank]);
    shm.rank = local_rank;
    shm.size = local_size;
    shm.timeout = left_until(deadline);
    shm.shared_buffer_bytes = *kind == "shm" ? o.shared_buffer_bytes : 0;  // a hierarchical group reads no arena
    shm.rank_labels = global_ranks;
    return connect_shm_group(shm);
  };
  if (*kind == "shm") return connect_local();

  std::vector<std::string> addresses;
  for (const auto& m : members) addresses.push_back(m.address);
  TcpGroupOptions tcp;
  tcp.group = o.name;
  tcp.generation = o.generation;
  tcp.timeout = left_until(deadline);
  tcp.tls = o.tls;
  auto mesh = connect_tcp_group(o.rank, std::move(listener), addresses, tcp);
  if (!mesh || *kind == "tcp") return mesh;
  auto local = connect_local();
  if (!local) return local.status();
  return make_hierarchical_transport(std::move(*mesh), std::move(*local), hosts);
}

}  // namespace troupe::collectives
