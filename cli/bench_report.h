// What `troupe bench allreduce` measured, and the two ways it prints it: an nccl-tests-like table
// (troupe's columns, then each peer's with its time over ours) and one JSON document.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench_allreduce.h"

namespace troupe::cli {

// One size as one implementation ran it, summed up over its ranks.
struct CaseSummary {
  size_t bytes = 0;
  size_t count = 0;
  int iters = 0;
  double time_us = 0;  // median over iterations of the slowest rank's time
  uint64_t wrong = 0;  // wrong elements over all ranks and iterations
};

// One implementation's run: troupe's own, or a peer's ("gloo", "mpi").
struct ImplementationRun {
  std::string name;
  // "ok", "failed", "not built" (the peer's program or mpirun is absent), "skipped" (it cannot run these options)
  std::string status;
  std::string detail;  // what it is, or why it did not run
  std::vector<CaseSummary> cases;  // one per size when status is "ok"
};

// Bytes per second over the time, in GB/s (1e9 bytes): algbw; busbw = algbw * 2(n-1)/n, the
// bandwidth each rank's links carry in a ring, comparable across rank counts (as in nccl-tests).
double algbw_gbps(size_t bytes, double time_us);
double busbw_gbps(size_t bytes, double time_us, int ranks);

// --netns: the link between the two namespaces as iperf3 measured it in the same invocation.
struct NetnsLink {
  double one_way_gbps = 0;  // Gbit/s (1e9 bit/s) at the receiver, one direction alone
  double bidir_gbps = 0;    // Gbit/s per direction with both directions at once
  std::string command;      // how it was measured
};

// busbw (bytes each rank sends per second, in each direction) over a link bandwidth in Gbit/s:
// 1.0 when the all-reduce keeps the link as busy as iperf3 did.
double link_ratio(size_t bytes, double time_us, int ranks, double link_gbps);

// `link` (--netns only, else null) adds the link's bandwidth and each row's busbw / link, against
// the one-way and the bidirectional figure.
void print_table(const BenchAllreduceOptions& o, const std::string& transport, const ImplementationRun& ours,
                 const std::vector<ImplementationRun>& peers, const NetnsLink* link = nullptr);
nlohmann::json to_json(const BenchAllreduceOptions& o, const std::string& transport, const ImplementationRun& ours,
                       const std::vector<ImplementationRun>& peers, const NetnsLink* link = nullptr);

}  // namespace troupe::cli
