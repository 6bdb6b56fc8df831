// Gloo's ring-chunked all-reduce on f32, one rank per process: the peer `troupe bench allreduce`
// runs beside troupe's own (bench/allreduce_case.h has the inputs, the check and the timing rule).
// The driver starts --size of these; they meet through Gloo's FileStore in --dir and talk over
// Gloo's TCP device on loopback (or --host). Each writes its times to --dir/result-<rank>.json and,
// once every rank's file is there, exits 0; or prints the error and exits 1.
//
//   gloo_allreduce --dir /tmp/d --rank 0 --size 2 --bytes 4096,67108864 --iters 50,10 --warmup 5,2
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench/allreduce_case.h"

namespace {

using troupe::bench::AllreduceCase;
using troupe::bench::CaseResult;

// Runs one case on the formed `context`: warmup, then timed iterations, each checked.
CaseResult run_case(const std::shared_ptr<gloo::Context>& context, const AllreduceCase& c, const std::string& op) {
  CaseResult r;
  r.bytes = c.bytes;
  r.count = c.bytes / sizeof(float);
  std::vector<float> input(r.count), buf(r.count);
  for (size_t i = 0; i < r.count; ++i) input[i] = troupe::bench::input_value(context->rank, i);
  const troupe::bench::ExpectedOutput expected(context->size, op, 0);
  // The algorithm object registers its buffers with the pairs once; run() reuses them.
  gloo::AllreduceRingChunked<float> allreduce(context, {buf.data()}, static_cast<int>(r.count),
                                              op == "max" ? gloo::ReductionFunction<float>::max
                                                          : gloo::ReductionFunction<float>::sum);
  gloo::BarrierAllToOne barrier(context);
  troupe::bench::time_iterations(c, input, buf, expected, [&] { barrier.run(); }, [&] { allreduce.run(); }, &r);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Gloo ring-chunked all-reduce, one rank (run by `troupe bench allreduce`)"};
  std::string dir, bytes, iters, warmup, op = "sum";
  int rank = 0, size = 1;
  double timeout_s = 120;
  app.add_option("--dir", dir, "Directory of the rendezvous and the result files")->required();
  app.add_option("--rank", rank, "This process's rank")->required();
  app.add_option("--size", size, "Number of ranks")->required()->check(CLI::Range(1, troupe::bench::kMaxRanks));
  app.add_option("--bytes", bytes, "Buffer sizes in bytes, comma-separated")->required();
  app.add_option("--iters", iters, "Timed iterations per size, comma-separated")->required();
  app.add_option("--warmup", warmup, "Untimed iterations per size, comma-separated")->required();
  app.add_option("--op", op, "sum or max")->check(CLI::IsMember({"sum", "max"}));
  app.add_option("--timeout", timeout_s, "Seconds any one Gloo operation may wait");
  std::string host = "127.0.0.1";
  app.add_option("--host", host, "The address this rank's TCP device binds to (--netns: its namespace's veth)");
  CLI11_PARSE(app, argc, argv);
  std::vector<AllreduceCase> cases;
  if (!troupe::bench::parse_cases(bytes, iters, warmup, &cases)) {
    std::fprintf(stderr, "gloo_allreduce: error: --bytes, --iters and --warmup must be lists of equal length\n");
    return 2;
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    context->connectFullMesh(store, device);
    std::vector<CaseResult> results;
    for (const AllreduceCase& c : cases) results.push_back(run_case(context, c, op));
    // No rank leaves while another still exchanges: a rank that closed its sockets early made a peer
    // still finishing its last all-reduce fail with "Connection closed by peer".
    gloo::BarrierAllToOne(context).run();
    if (!troupe::bench::write_results(dir, rank, "gloo", results)) return 1;
    // Nor before every rank is past that barrier: the root's release could reach a rank together
    // with the root's connection closing, and Gloo then reported the close instead (seen in CI).
    // Every rank writes its results once past it, so those files say who is.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    for (int r = 0; r < size; ++r) {
      while (!std::filesystem::exists(troupe::bench::result_file(dir, r)) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}
