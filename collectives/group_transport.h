// How a group's members talk, decided from where they run (the node of each member in the GCS):
//   all on one node            -> shared memory ("shm")
//   each on its own node       -> TCP mesh ("tcp")
//   several nodes, several members on some -> "hierarchical" (shm within a node, TCP between
//                                 one leader per node)
// A member without a node id is placed by the host part of its address. GroupOptions::transport
// overrides "auto" with one of the names above.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/group_rendezvous.h"
#include "collectives/tcp_transport.h"
#include "gcs/records.h"

namespace troupe::collectives {

// host_of_rank[r]: a small label per distinct node (or address host) of member r.
std::vector<int> host_layout(const std::vector<gcs::GroupMember>& members);

// "shm", "tcp" or "hierarchical" for `requested` ("auto" or one of those); invalid_argument for
// other names, or "shm" asked of members on several nodes.
Expected<std::string> choose_group_transport(const std::string& requested, const std::vector<int>& host_of_rank);

// Connects this member (options.rank) to the others with the chosen transport. `listener` is the
// TCP listener whose address the member registered. Waits at most until `deadline`.
Expected<std::unique_ptr<Transport>> connect_group_transport(const GroupOptions& options,
                                                            const std::vector<gcs::GroupMember>& members,
                                                            TcpListener listener, Clock::time_point deadline);

}  // namespace troupe::collectives
