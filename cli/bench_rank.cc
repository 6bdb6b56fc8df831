// One rank of `troupe bench allreduce` (`troupe bench-rank`, started by the driver): joins the group
// without Redis (a /dev/shm segment, or address files in the driver's temp dir and a TCP mesh), then
// runs every case as bench/allreduce_case.h describes and writes result-<rank>.json there.
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/bench_allreduce.h"
#include "tls/tls_context.h"
#include "collectives/communicator.h"
#include "collectives/hierarchical_transport.h"
#include "collectives/shm_transport.h"
#include "collectives/tcp_transport.h"

namespace troupe::cli {
namespace {

using collectives::Clock;
using collectives::Communicator;
using collectives::Transport;

std::string address_file(const std::string& dir, int rank) { return dir + "/addr-" + std::to_string(rank); }

// Publishes `address` for the other ranks: written to a temporary file, then renamed into place.
Status publish_address(const std::string& dir, int rank, const std::string& address) {
  const std::string path = address_file(dir, rank), tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << address << "\n";
    if (!out) return io_error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return io_error("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return {};
}

// Waits until every rank published its address; timeout naming the ranks still missing.
Expected<std::vector<std::string>> gather_addresses(const std::string& dir, int size, Clock::time_point deadline) {
  std::vector<std::string> addresses(size);
  while (true) {
    std::string missing;
    for (int r = 0; r < size; ++r) {
      if (!addresses[r].empty()) continue;
      std::ifstream in(address_file(dir, r));
      if (!(in >> addresses[r])) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (missing.empty()) return addresses;
    if (Clock::now() >= deadline) {
      return Status(Code::timeout, "ranks " + missing + " did not publish their address in " + dir + " in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The shm group of the ranks labelled `host` (all ranks when host_of_rank is empty), named after
// the run's temp dir.
Expected<std::unique_ptr<Transport>> connect_local(const BenchRankOptions& o, Clock::time_point deadline) {
  collectives::ShmGroupOptions shm;
  if (o.transport == "shm" && o.zero_copy)  // an arena that holds the largest case's buffer
    for (const bench::AllreduceCase& c : o.cases) shm.shared_buffer_bytes = std::max(shm.shared_buffer_bytes, c.bytes);
  shm.name = std::filesystem::path(o.dir).parent_path().filename().string();  // "troupe-bench-XXXXXX"
  shm.rank = o.rank;
  shm.size = o.size;
  if (!o.host_of_rank.empty()) {
    const int host = o.host_of_rank[o.rank];
    shm.name += ".host" + std::to_string(host);
    shm.rank = shm.size = 0;
    for (int r = 0; r < o.size; ++r) {
      if (o.host_of_rank[r] != host) continue;
      if (r < o.rank) ++shm.rank;
      ++shm.size;
      shm.rank_labels.push_back(r);  // errors name global ranks
    }
  }
  shm.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return collectives::connect_shm_group(shm);
}

// The one place a transport is made. shm: one /dev/shm segment named after the run's temp dir.
// tcp: a listener on listen_host, its address in a file, then the mesh; with host labels that put
// several ranks on a host (--netns), the mesh plus each host's shm group, hierarchically.
Expected<std::unique_ptr<Transport>> make_transport(const BenchRankOptions& o) {
  const auto deadline = Clock::now() + o.timeout;
  if (o.transport == "shm") return connect_local(o, deadline);
  if (o.transport != "tcp") return invalid_argument("transport '" + o.transport + "': expected shm or tcp");
  if (!o.host_of_rank.empty() && static_cast<int>(o.host_of_rank.size()) != o.size) {
    return invalid_argument("--hosts names " + std::to_string(o.host_of_rank.size()) + " ranks, not --size " +
                            std::to_string(o.size));
  }
  auto listener = collectives::TcpListener::open(o.listen_host);
  if (!listener.ok()) return listener.status();
  TROUPE_RETURN_IF_ERROR(publish_address(o.dir, o.rank, o.listen_host + ":" + std::to_string(listener->port())));
  auto addresses = gather_addresses(o.dir, o.size, deadline);
  if (!addresses.ok()) return addresses.status();
  collectives::TcpGroupOptions tcp;
  tcp.group = o.dir;  // a rank of another run (another temp dir) is refused
  if (!o.tls_dir.empty()) {
    auto context = tls::TlsContext::load({o.tls_dir + "/ca.pem", o.tls_dir + "/rank.pem", o.tls_dir + "/rank.key"});
    if (!context.ok()) return context.status();
    tcp.tls = *context;
  }
  tcp.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  auto mesh = collectives::connect_tcp_group(o.rank, std::move(*listener), *addresses, tcp);
  if (!mesh.ok() || !is_hierarchical(o.host_of_rank)) return mesh;
  auto local = connect_local(o, deadline);
  if (!local.ok()) return local.status();
  return collectives::make_hierarchical_transport(std::move(*mesh), std::move(*local), o.host_of_rank);
}

collectives::ReduceOp parse_op(const std::string& op) {
  using collectives::ReduceOp;
  return op == "max" ? ReduceOp::max : op == "avg" ? ReduceOp::avg : ReduceOp::sum;
}

// Element i of a buffer of `dtype`, as float; and the reverse.
float load(const uint8_t* buf, DType dtype, size_t i) {
  if (dtype == DType::f32) return reinterpret_cast<const float*>(buf)[i];
  const uint16_t h = reinterpret_cast<const uint16_t*>(buf)[i];
  return dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}
void store(std::vector<uint8_t>& buf, DType dtype, size_t i, float v) {
  if (dtype == DType::f32) reinterpret_cast<float*>(buf.data())[i] = v;
  else reinterpret_cast<uint16_t*>(buf.data())[i] = dtype == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
}

// How far an average may be from the exact one: the rounding of the dtype it is stored in.
double avg_tolerance(DType dtype) { return dtype == DType::f32 ? 1e-6 : dtype == DType::f16 ? 1e-3 : 8e-3; }

// Warmup, then timed iterations of one case, in place (the input restored before each, untimed),
// each after a barrier and each checked.
Expected<bench::CaseResult> run_case(Communicator& comm, const BenchRankOptions& o, const bench::AllreduceCase& c) {
  bench::CaseResult r;
  r.bytes = c.bytes;
  r.count = c.bytes / dtype_size(o.dtype);
  std::vector<uint8_t> input(c.bytes), own(c.bytes);
  // With --zero-copy over shm the buffer is this rank's arena: peers read it where it lies.
  auto* shared = static_cast<uint8_t*>(comm.shared_buffer(c.bytes));
  uint8_t* buf = shared ? shared : own.data();
  for (size_t i = 0; i < r.count; ++i) store(input, o.dtype, i, bench::input_value(o.rank, i));
  const bench::ExpectedOutput expected(o.size, o.op, avg_tolerance(o.dtype));
  collectives::CollectiveOptions opts, barrier_opts;  // --algorithm names an all-reduce algorithm
  opts.timeout = barrier_opts.timeout = o.timeout;
  opts.algorithm = o.algorithm;
  for (int it = 0; it < c.warmup + c.iters; ++it) {
    std::memcpy(buf, input.data(), c.bytes);
    TROUPE_RETURN_IF_ERROR(comm.barrier(barrier_opts));
    const auto t0 = Clock::now();
    TROUPE_RETURN_IF_ERROR(comm.allreduce(buf, buf, r.count, o.dtype, parse_op(o.op), opts));
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    r.wrong += expected.count_wrong(r.count, [&](size_t i) { return load(buf, o.dtype, i); });
    if (it >= c.warmup) r.times_us.push_back(us);
  }
  return r;
}

}  // namespace

Status run_bench_rank(const BenchRankOptions& o) {
  const std::string who = "rank " + std::to_string(o.rank);
  auto transport = make_transport(o);
  if (!transport.ok()) return transport.status().with_context(who + ": joining the group");
  Communicator comm(std::move(*transport));
  std::vector<bench::CaseResult> results;
  for (const bench::AllreduceCase& c : o.cases) {
    auto r = run_case(comm, o, c);
    if (!r.ok()) return r.status().with_context(who + ": " + std::to_string(c.bytes) + " bytes");
    results.push_back(std::move(*r));
  }
  if (!bench::write_results(o.dir, o.rank, "troupe", results)) {
    return io_error(who + ": cannot write " + bench::result_file(o.dir, o.rank));
  }
  return {};
}

}  // namespace troupe::cli
