// MPI_Allreduce on MPI_FLOAT, in place: the peer `troupe bench allreduce` runs beside troupe's own
// (bench/allreduce_case.h has the inputs, the check and the timing rule). The driver starts it under
// mpirun; each rank writes its times to --dir/result-<rank>.json and exits 0, or prints the error
// and exits 1 (MPI_Abort, so mpirun stops the others).
//
//   mpirun -np 2 mpi_allreduce --dir /tmp/d --bytes 4096,67108864 --iters 50,10 --warmup 5,2
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings are deprecated and warn
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/allreduce_case.h"

namespace {

using troupe::bench::AllreduceCase;
using troupe::bench::CaseResult;

// Runs one case: warmup, then timed iterations, each checked. Exits through MPI_Abort on an MPI error.
CaseResult run_case(int rank, int size, const AllreduceCase& c, const std::string& op) {
  CaseResult r;
  r.bytes = c.bytes;
  r.count = c.bytes / sizeof(float);
  std::vector<float> input(r.count), buf(r.count);
  for (size_t i = 0; i < r.count; ++i) input[i] = troupe::bench::input_value(rank, i);
  const troupe::bench::ExpectedOutput expected(size, op, 0);
  const MPI_Op mpi_op = op == "max" ? MPI_MAX : MPI_SUM;
  troupe::bench::time_iterations(
      c, input, buf, expected, [] { MPI_Barrier(MPI_COMM_WORLD); },
      [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(r.count), MPI_FLOAT, mpi_op, MPI_COMM_WORLD); },
      &r);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // MPI's default error handler aborts the job on any MPI error
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CLI::App app{"MPI_Allreduce, one rank (run under mpirun by `troupe bench allreduce`)"};
  std::string dir, bytes, iters, warmup, op = "sum";
  app.add_option("--dir", dir, "Directory of the result files")->required();
  app.add_option("--bytes", bytes, "Buffer sizes in bytes, comma-separated")->required();
  app.add_option("--iters", iters, "Timed iterations per size, comma-separated")->required();
  app.add_option("--warmup", warmup, "Untimed iterations per size, comma-separated")->required();
  app.add_option("--op", op, "sum or max")->check(CLI::IsMember({"sum", "max"}));
  std::vector<AllreduceCase> cases;
  try {
    app.parse(argc, argv);
    if (!troupe::bench::parse_cases(bytes, iters, warmup, &cases)) {
      throw CLI::ValidationError("--bytes, --iters and --warmup must be lists of equal length");
    }
  } catch (const CLI::Error& e) {
    if (rank == 0) std::fprintf(stderr, "mpi_allreduce: error: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  if (size > troupe::bench::kMaxRanks) {
    if (rank == 0) std::fprintf(stderr, "mpi_allreduce: error: at most %d ranks\n", troupe::bench::kMaxRanks);
    MPI_Finalize();
    return 2;
  }
  std::vector<CaseResult> results;
  for (const AllreduceCase& c : cases) results.push_back(run_case(rank, size, c, op));
  const bool ok = troupe::bench::write_results(dir, rank, "mpi", results);
  if (!ok) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
  return 0;
}
