// `troupe bench allreduce`: times troupe's all-reduce across N local processes, size by size, and in
// the same invocation Gloo's ring-chunked all-reduce and OpenMPI's MPI_Allreduce on the same sizes
// (bench/peers/), every result checked; prints an nccl-tests-like table or one JSON document.
//
//   driver (run_bench_allreduce)
//     |- spawns N x `troupe bench-rank` -> a /dev/shm segment (shm), or address files in a private
//     |                                    temp dir and a TCP mesh (tcp); writes result-<rank>.json
//     |                                    (bench/allreduce_case.h)
//     |- spawns N x gloo_allreduce, or mpirun -np N mpi_allreduce (same files)
//     '- reads the files: per iteration the slowest rank's time, median over iterations
//
// --netns (root): the ranks run on two "hosts", network namespaces joined by a veth pair
// (cli/bench_netns.h), half in each, listening on the veth addresses; ranks of one namespace form a
// hierarchical group (shm within it, TCP between). iperf3 measures the link first, in the same
// invocation, and the report gives busbw as a fraction of it. Gloo's ranks are placed alike.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bench/allreduce_case.h"
#include "core/dtype.h"
#include "core/status.h"

namespace troupe::cli {

struct BenchAllreduceOptions {
  int ranks = 2;
  std::vector<size_t> bytes;                // one case per size
  std::string transport = "auto";           // auto, tcp or shm
  DType dtype = DType::f32;
  std::string op = "sum";                   // sum, avg or max
  std::string algorithm = "auto";           // CollectiveOptions::algorithm
  int iters = 0;                            // timed iterations per size; 0: by size (plan_cases)
  int warmup = -1;                          // untimed iterations per size; -1: by size
  std::chrono::milliseconds timeout{120000};  // for each implementation's whole run
  std::vector<std::string> peers;           // of "gloo", "mpi"
  bool json = false;
  bool netns = false;                       // two network namespaces joined by a veth (root only)
  // shm: each rank's buffer lives in its shared-memory arena (Communicator::shared_buffer), as a
  // trainer's gradients would, so the all-reduce copies nothing in or out. false: private buffers.
  bool zero_copy = true;
  int iperf_seconds = 3;                    // --netns: how long iperf3 measures the link
  std::string command_line;                 // echoed in the output
};

// Runs the benchmark and prints its report; returns the process exit code: 0 when every
// implementation that ran finished with every result right, 1 when one failed, timed out or got a
// wrong result (the failing rank and why on stderr), 2 for bad options.
int run_bench_allreduce(const BenchAllreduceOptions& options);

// The cases for `bytes`: --iters/--warmup when given, else fewer iterations for larger buffers.
std::vector<bench::AllreduceCase> plan_cases(const BenchAllreduceOptions& options);

// The transport that `requested` (auto, tcp, shm) means for ranks of one host: auto is shm.
Expected<std::string> resolve_transport(const std::string& requested);

// One rank process of the benchmark (`troupe bench-rank`, started by the driver).
struct BenchRankOptions {
  std::string dir;  // the driver's temp dir: address files in, result file out
  int rank = 0;
  int size = 1;
  std::vector<bench::AllreduceCase> cases;
  std::string transport = "tcp";
  DType dtype = DType::f32;
  std::string op = "sum";
  std::string algorithm = "auto";
  std::chrono::milliseconds timeout{120000};  // rendezvous, and each collective call
  std::string listen_host = "127.0.0.1";      // tcp: the address this rank listens on
  // tcp: the host label of every rank (--netns); ranks sharing a label and not all alike form a
  // hierarchical group (shm within a host, TCP between). Empty: all on one host, plain TCP mesh.
  std::vector<int> host_of_rank;
  bool zero_copy = true;  // shm: buffers in the shared arena (see BenchAllreduceOptions)
  std::string tls_dir;    // tcp: the mesh under TLS with ca.pem, rank.pem, rank.key from here
};

// True when `host_of_rank` puts several ranks on some host but not every rank on one: such a
// group is hierarchical (shm within a host, TCP between).
bool is_hierarchical(const std::vector<int>& host_of_rank);

// Joins the group, runs every case and writes result-<rank>.json; the error names the rank and case.
Status run_bench_rank(const BenchRankOptions& options);

}  // namespace troupe::cli
