// Ranks spread over several hosts, several per host: all-reduce in three stages — reduce within
// each host over its fast local transport (shared memory), all-reduce across hosts between one
// leader per host over TCP, broadcast within each host — so only one rank per host puts bytes on
// the network. Chosen by form_group when the GCS shows some but not all members on one node.
//
// The transport owns a TCP mesh of all ranks (point-to-point algorithms for the other collectives
// run over it, as does the leaders' all-reduce through a SubTransport view) and this rank's local
// group. The leader of a host is its lowest global rank; local ranks follow global rank order.
// f16/bf16 buffers are rounded to their dtype between the stages (f32 accumulation inside each).
// Buffers above one chunk (4 MiB) are pipelined: the leader's helper thread all-reduces chunk k
// over TCP while the host reduces chunk k+1 and broadcasts chunk k-1, so the link does not idle
// during the shared-memory stages.
#pragma once

#include <memory>
#include <vector>

#include "collectives/transport.h"

namespace troupe::collectives {

// host_of_rank[r] labels rank r's host (any ints; equal means same host). `mesh` spans all ranks;
// `local` spans the ranks of this rank's host, numbered in global rank order.
Expected<std::unique_ptr<Transport>> make_hierarchical_transport(std::unique_ptr<Transport> mesh,
                                                                 std::unique_ptr<Transport> local,
                                                                 const std::vector<int>& host_of_rank);

}  // namespace troupe::collectives
