// `troupe bench allreduce` (flags -> BenchAllreduceOptions -> run_bench_allreduce) and the hidden
// `troupe bench-rank` it starts once per rank.
#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

#include "cli/bench_allreduce.h"
#include "cli/commands.h"

namespace troupe::cli {
namespace {

// "4K,1M,64M" -> {4096, 1048576, 67108864}: sizes in bytes, with K, M or G meaning 2^10, 2^20, 2^30.
Expected<std::vector<size_t>> parse_byte_sizes(const std::string& text) {
  std::vector<size_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    const std::string suffix = end ? end : "";
    const int shift = suffix.empty() ? 0 : suffix == "K" || suffix == "k" ? 10 : suffix == "M" || suffix == "m" ? 20
                                        : suffix == "G" || suffix == "g" ? 30 : -1;
    if (item.empty() || !std::isdigit(static_cast<unsigned char>(item[0])) || shift < 0 || v == 0 || v > (1ull << 34)) {
      return invalid_argument("--bytes '" + text + "': '" + item + "' is not a size; use a comma-separated list like "
                              "4K,1M,64M (K, M, G: 2^10, 2^20, 2^30 bytes)");
    }
    out.push_back(static_cast<size_t>(v) << shift);
  }
  if (out.empty()) return invalid_argument("--bytes is empty; give sizes like 4K,1M,64M");
  return out;
}

// "gloo,mpi" -> {"gloo", "mpi"}; "none" -> {}.
Expected<std::vector<std::string>> parse_peers(const std::string& text) {
  std::vector<std::string> out;
  if (text == "none") return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item != "gloo" && item != "mpi" && item != "tls") {
      return invalid_argument("--peers '" + text + "': '" + item +
                              "' is not a peer; use gloo, mpi, tls (troupe's own TCP mesh under TLS), a list of "
                              "them, or none");
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  return out;
}

struct BenchFlags {
  BenchAllreduceOptions options;
  std::string bytes = "4K,1M,64M";
  std::string dtype = "f32";
  std::string peers = "gloo,mpi";
  double timeout_s = 120;
  bool staged = false;
};

// The flags both commands share: what one rank runs.
void add_case_flags(CLI::App* cmd, std::string* transport, std::string* dtype, std::string* op, std::string* algorithm,
                    double* timeout_s) {
  cmd->add_option("--transport", *transport, "shm, tcp, or auto (shm: every rank is on this host)")
      ->check(CLI::IsMember({"shm", "tcp", "auto"}))->capture_default_str();
  cmd->add_option("--dtype", *dtype, "Element type")->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--op", *op, "Reduction")->check(CLI::IsMember({"sum", "avg", "max"}))->capture_default_str();
  cmd->add_option("--algorithm", *algorithm, "auto, ring, halving_doubling, or the transport's native one")
      ->capture_default_str();
  cmd->add_option("--timeout", *timeout_s, "Seconds each implementation's whole run may take")
      ->check(CLI::PositiveNumber)->capture_default_str();
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

Runner add_bench_command(CLI::App& app, GlobalOptions& global) {
  (void)global;
  auto* bench = app.add_subcommand("bench", "Benchmark collectives across local processes, beside Gloo and MPI");
  bench->require_subcommand(1);
  auto* cmd = bench->add_subcommand("allreduce", "Time all-reduce over N local ranks, size by size, results checked");
  auto f = std::make_shared<BenchFlags>();
  BenchAllreduceOptions& o = f->options;
  cmd->add_option("--ranks", o.ranks, "Processes in the group")->check(CLI::Range(1, bench::kMaxRanks))
      ->capture_default_str();
  cmd->add_option("--bytes", f->bytes, "Buffer sizes, comma-separated, with K/M/G suffixes")->capture_default_str();
  add_case_flags(cmd, &o.transport, &f->dtype, &o.op, &o.algorithm, &f->timeout_s);
  cmd->add_option("--iters", o.iters, "Timed iterations per size (default: 50 up to 64K, 20 up to 4M, 10 above)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup", o.warmup, "Untimed iterations per size (default: 5 up to 4M, 2 above)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--peers", f->peers,
                  "Run these beside troupe: gloo, mpi, tls (troupe's TCP mesh under TLS, as on a --tls cluster), a "
                  "comma-separated list, or none")->capture_default_str();
  cmd->add_flag("--json", o.json, "Print one JSON document instead of the table");
  cmd->add_flag("--netns", o.netns,
                "Root only: run the ranks on two network namespaces joined by a veth pair (half in each; "
                "hierarchical when a namespace holds several), iperf3 measuring the link first");
  cmd->add_option("--iperf-seconds", o.iperf_seconds, "--netns: seconds iperf3 measures the link")
      ->check(CLI::Range(1, 60))->capture_default_str();
  cmd->add_flag("--staged", f->staged,
                "shm: all-reduce private buffers (copied in and out) instead of buffers in the shared arena");
  return [f]() -> int {
    BenchAllreduceOptions& o = f->options;
    auto bytes = parse_byte_sizes(f->bytes);
    if (!bytes.ok()) return report_error("bench allreduce", bytes.status());
    o.bytes = *bytes;
    parse_dtype(f->dtype, &o.dtype);
    for (size_t b : o.bytes) {
      if (b % dtype_size(o.dtype) != 0) {
        return report_error("bench allreduce", invalid_argument("--bytes: " + std::to_string(b) +
                                                                " is not a whole number of " + f->dtype + " elements"));
      }
    }
    auto peers = parse_peers(f->peers);
    if (!peers.ok()) return report_error("bench allreduce", peers.status());
    o.peers = *peers;
    o.timeout = to_ms(f->timeout_s);
    o.zero_copy = !f->staged;
    // The command again, every default spelled out, so a pasted report says how to reproduce it.
    o.command_line = "troupe bench allreduce --ranks " + std::to_string(o.ranks) + " --bytes " + f->bytes +
                     " --transport " + o.transport + " --dtype " + f->dtype + " --op " + o.op + " --algorithm " +
                     o.algorithm + (o.iters > 0 ? " --iters " + std::to_string(o.iters) : "") +
                     (o.warmup >= 0 ? " --warmup " + std::to_string(o.warmup) : "") + " --peers " + f->peers +
                     (o.netns ? " --netns --iperf-seconds " + std::to_string(o.iperf_seconds) : "") +
                     (f->staged ? " --staged" : "");
    return run_bench_allreduce(o);
  };
}

Runner add_bench_rank_command(CLI::App& app, GlobalOptions& global) {
  (void)global;
  auto* cmd = app.add_subcommand("bench-rank", "One rank of `troupe bench allreduce` (started by it)");
  cmd->group("");  // internal: hidden from --help
  auto o = std::make_shared<BenchRankOptions>();
  auto lists = std::make_shared<std::array<std::string, 3>>();
  auto dtype = std::make_shared<std::string>("f32");
  auto timeout_s = std::make_shared<double>(120);
  cmd->add_option("--dir", o->dir, "The driver's temp dir")->required();
  cmd->add_option("--rank", o->rank, "This rank")->required();
  cmd->add_option("--size", o->size, "Ranks in the group")->required()->check(CLI::Range(1, bench::kMaxRanks));
  cmd->add_option("--bytes", (*lists)[0], "Sizes in bytes, comma-separated")->required();
  cmd->add_option("--iters", (*lists)[1], "Timed iterations per size")->required();
  cmd->add_option("--warmup", (*lists)[2], "Untimed iterations per size")->required();
  add_case_flags(cmd, &o->transport, dtype.get(), &o->op, &o->algorithm, timeout_s.get());
  cmd->add_option("--listen-host", o->listen_host, "tcp: the address this rank listens on")->capture_default_str();
  cmd->add_option("--hosts", o->host_of_rank, "tcp: each rank's host label, comma-separated (--netns)")
      ->delimiter(',');
  cmd->add_option("--zero-copy", o->zero_copy, "shm: buffers in the shared arena")->capture_default_str();
  cmd->add_option("--tls-dir", o->tls_dir, "tcp: run the mesh under TLS with ca.pem, rank.pem and rank.key from here");
  return [o, lists, dtype, timeout_s]() -> int {
    if (!bench::parse_cases((*lists)[0], (*lists)[1], (*lists)[2], &o->cases)) {
      return report_error("bench-rank",
                          invalid_argument("--bytes, --iters and --warmup must be lists of equal length"));
    }
    parse_dtype(*dtype, &o->dtype);
    o->timeout = to_ms(*timeout_s);
    Status st = run_bench_rank(*o);
    return st.ok() ? 0 : report_error("bench-rank", st);
  };
}

}  // namespace troupe::cli
