// The driver of `troupe bench allreduce`: plans the cases, runs troupe's ranks and then each peer's
// in a private temp dir, sums up their result files and prints the report (cli/bench_report.cc).
#include "cli/bench_allreduce.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>

#include "cli/bench_launch.h"
#include "cli/bench_netns.h"
#include "cli/bench_report.h"
#include "cli/commands.h"
#include "core/process.h"
#include "tls/pki.h"

namespace troupe::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using bench::AllreduceCase;

// The argv of one rank program: the cases as the three lists bench::parse_cases reads.
std::vector<std::string> case_flags(const std::vector<AllreduceCase>& cases) {
  std::string bytes, iters, warmup;
  for (const AllreduceCase& c : cases) {
    const char* sep = bytes.empty() ? "" : ",";
    bytes += sep + std::to_string(c.bytes);
    iters += sep + std::to_string(c.iters);
    warmup += sep + std::to_string(c.warmup);
  }
  return {"--bytes", bytes, "--iters", iters, "--warmup", warmup};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Reads every rank's result file in `dir`: per case, the slowest rank's time of each iteration, its
// median, and the wrong elements of all ranks. corrupt_data naming the file when one does not fit.
Expected<std::vector<CaseSummary>> summarize(const std::string& dir, int ranks,
                                             const std::vector<AllreduceCase>& cases) {
  std::vector<CaseSummary> out(cases.size());
  std::vector<std::vector<double>> slowest(cases.size());
  for (size_t k = 0; k < cases.size(); ++k) slowest[k].assign(cases[k].iters, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const std::string path = bench::result_file(dir, r);
    std::ifstream in(path);
    nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.contains("cases") || doc["cases"].size() != cases.size()) {
      return corrupt_data("rank " + std::to_string(r) + "'s result file " + path +
                          " is missing or does not hold one case per size");
    }
    for (size_t k = 0; k < cases.size(); ++k) {
      const nlohmann::json& c = doc["cases"][k];
      const auto times = c.value("times_us", std::vector<double>{});
      if (times.size() != slowest[k].size() || c.value("bytes", size_t{0}) != cases[k].bytes) {
        return corrupt_data(path + ": case " + std::to_string(k) + " is not " + std::to_string(cases[k].bytes) +
                            " bytes with " + std::to_string(cases[k].iters) + " times");
      }
      for (size_t i = 0; i < times.size(); ++i) slowest[k][i] = std::max(slowest[k][i], times[i]);
      out[k].wrong += c.value("wrong", uint64_t{0});
      out[k].count = c.value("count", size_t{0});
    }
  }
  for (size_t k = 0; k < cases.size(); ++k) {
    out[k].bytes = cases[k].bytes;
    out[k].iters = cases[k].iters;
    out[k].time_us = median(slowest[k]);
  }
  return out;
}

// Starts one implementation's processes with `start`, waits for them until the deadline (--timeout)
// and sums up their results in `dir`. A failure is returned in the run (status "failed", detail
// why), with the failed process's exit code in *exit_code.
ImplementationRun run_implementation(const std::string& name, const std::string& detail, const std::string& dir,
                                     const BenchAllreduceOptions& o, const std::vector<AllreduceCase>& cases,
                                     const std::function<Status(std::vector<LaunchedProcess>*)>& start,
                                     int* exit_code) {
  ImplementationRun run{name, "failed", detail, {}};
  const auto deadline = Clock::now() + o.timeout;
  std::vector<LaunchedProcess> processes;
  Status started = start(&processes);
  GroupOutcome outcome = wait_all(processes, started.ok() ? deadline : Clock::now());
  if (!started.ok() || !outcome.error.ok()) {
    run.detail = started.ok() ? outcome.error.message() : started.message();
    *exit_code = outcome.exit_code;
    return run;
  }
  auto summary = summarize(dir, o.ranks, cases);
  if (!summary.ok()) {
    run.detail = summary.status().message();
    return run;
  }
  run.status = "ok";
  run.cases = std::move(*summary);
  return run;
}

// Where rank r runs: on this host, or (--netns) in one of two namespaces, listening on its address.
struct Placement {
  const NetnsHosts* hosts = nullptr;  // null: every rank on this host, on loopback
  int ranks = 1;
  int host(int r) const { return netns_host_of(r, ranks); }
  // argv run as rank r: in its namespace when there are hosts.
  std::vector<std::string> wrap(int r, std::vector<std::string> argv) const {
    if (hosts == nullptr) return argv;
    std::vector<std::string> out = hosts->exec_prefix(host(r));
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
  std::string address(int r) const { return hosts ? hosts->address(host(r)) : "127.0.0.1"; }
};

// Starts `ranks` copies of `program_argv` + "--rank r" (+ what `extra` adds for rank r), placed
// by `where`, with their logs in `dir`.
Status start_ranks(const std::vector<std::string>& program_argv, int ranks, const std::string& dir,
                   std::vector<LaunchedProcess>* out, const Placement& where = {},
                   const std::function<std::vector<std::string>(int)>& extra = nullptr) {
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> argv = program_argv;
    argv.insert(argv.end(), {"--rank", std::to_string(r)});
    if (extra) {
      const std::vector<std::string> more = extra(r);
      argv.insert(argv.end(), more.begin(), more.end());
    }
    argv = where.wrap(r, std::move(argv));
    auto p = launch("rank " + std::to_string(r), argv, dir + "/rank-" + std::to_string(r) + ".log");
    if (!p.ok()) return p.status();
    out->push_back(*p);
  }
  return {};
}

std::string seconds(std::chrono::milliseconds t) { return std::to_string(t.count() / 1000.0); }

// A peer that cannot run here: why, and the status to report ("not built" or "skipped").
ImplementationRun peer_not_run(const std::string& name, const std::string& status, const std::string& why) {
  std::fprintf(stderr, "troupe bench allreduce: warning: peer %s %s: %s\n", name.c_str(),
               status == "skipped" ? "skipped" : "NOT BUILT", why.c_str());
  return {name, status, why, {}};
}

ImplementationRun run_peer(const std::string& name, const BenchAllreduceOptions& o,
                           const std::vector<AllreduceCase>& cases, const std::string& root, const Placement& where,
                           int* exit_code) {
  if (o.dtype != DType::f32) return peer_not_run(name, "skipped", "the peer runs f32 only");
  if (where.hosts && name == "mpi") {
    return peer_not_run(name, "skipped", "--netns: mpirun starts its ranks itself, so they cannot be placed in the "
                                         "namespaces");
  }
  if (o.op == "avg") return peer_not_run(name, "skipped", "the peer has no avg (run --op sum or max)");
  const std::string bin_dir = fs::path(self_executable()).parent_path().string();
  const std::string program = bin_dir + "/" + name + "_allreduce";
  const std::string dir = root + "/" + name;
  std::vector<std::string> args = {"--dir", dir, "--op", o.op};
  for (const std::string& f : case_flags(cases)) args.push_back(f);
  if (name == "gloo") {
    if (::access(program.c_str(), X_OK) != 0) {
      return peer_not_run(name, "not built", program + " is absent: this build found no Gloo (apt install libgloo-dev, "
                                             "then re-run cmake)");
    }
    fs::create_directories(dir);
    std::vector<std::string> argv = {program, "--size", std::to_string(o.ranks), "--timeout", seconds(o.timeout)};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string detail = where.hosts ? "Gloo AllreduceRingChunked<float>, TCP device on the veth addresses "
                                             "(every pair over TCP), FileStore rendezvous"
                                           : "Gloo AllreduceRingChunked<float>, TCP device on loopback, FileStore "
                                             "rendezvous";
    return run_implementation(name, detail, dir, o, cases, [&](auto* out) {
      return start_ranks(argv, o.ranks, dir, out, where,
                         [&](int r) { return std::vector<std::string>{"--host", where.address(r)}; });
    }, exit_code);
  }
  const std::string mpirun = find_in_path("mpirun");
  if (::access(program.c_str(), X_OK) != 0) {
    return peer_not_run(name, "not built", program + " is absent: this build found no MPI (apt install "
                                           "libopenmpi-dev openmpi-bin, then re-run cmake)");
  }
  if (mpirun.empty()) return peer_not_run(name, "not built", "mpirun is not in PATH (apt install openmpi-bin)");
  fs::create_directories(dir);
  // vader: shared memory between the local ranks (self: a rank to itself).
  std::vector<std::string> argv = {mpirun, "--oversubscribe", "-np", std::to_string(o.ranks),
                                   "--mca", "btl", "self,vader"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back(program);
  argv.insert(argv.end(), args.begin(), args.end());
  return run_implementation(name, "MPI_Allreduce(MPI_IN_PLACE, MPI_FLOAT) under mpirun --mca btl self,vader", dir, o,
                            cases, [&](auto* out) {
                              auto p = launch("mpirun", argv, dir + "/mpirun.log");
                              if (p.ok()) out->push_back(*p);
                              return p.status();
                            }, exit_code);
}

}  // namespace

bool is_hierarchical(const std::vector<int>& host_of_rank) {
  bool shared = false, spread = false;
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    for (size_t q = 0; q < r; ++q) (host_of_rank[q] == host_of_rank[r] ? shared : spread) = true;
  }
  return shared && spread;
}

Expected<std::string> resolve_transport(const std::string& requested) {
  // auto: every rank of this benchmark is on this host, so shared memory.
  if (requested == "auto" || requested == "shm") return std::string("shm");
  if (requested == "tcp") return std::string("tcp");
  return invalid_argument("--transport '" + requested + "': expected shm, tcp or auto");
}

std::vector<AllreduceCase> plan_cases(const BenchAllreduceOptions& o) {
  std::vector<AllreduceCase> cases;
  for (size_t bytes : o.bytes) {
    // Latency-bound sizes are cheap and noisy: many iterations; bandwidth-bound ones take long.
    const int iters = o.iters > 0 ? o.iters : bytes <= (64 << 10) ? 50 : bytes <= (4 << 20) ? 20 : 10;
    const int warmup = o.warmup >= 0 ? o.warmup : bytes <= (4 << 20) ? 5 : 2;
    cases.push_back({bytes, iters, warmup});
  }
  return cases;
}

namespace {

// --netns: the two hosts (deleted with this), the link measured between them, and the flags that
// tell troupe's ranks where each rank runs.
struct NetnsSetup {
  std::unique_ptr<NetnsHosts> hosts;
  NetnsLink link;
  std::vector<std::string> rank_placement;
};

// --netns: makes the two hosts, measures their link and places the ranks on them (where->hosts);
// ranks on both hosts and sharing one make *transport hierarchical. The exit code when that fails
// (the failure reported), else nullopt.
std::optional<int> set_up_netns(const char* cmd, const BenchAllreduceOptions& o, const std::string& root,
                                NetnsSetup* netns, Placement* where, std::string* transport) {
  auto made = NetnsHosts::create();
  if (!made.ok()) return report_error(cmd, made.status());
  netns->hosts = std::move(*made);
  const NetnsHosts& hosts = *netns->hosts;
  where->hosts = &hosts;
  auto measured = measure_link(hosts, o.iperf_seconds, root);
  if (!measured.ok()) {
    std::fprintf(stderr, "troupe %s: error: %s\n  (logs kept in %s)\n", cmd, measured.status().message().c_str(),
                 root.c_str());
    return kExitFailure;
  }
  netns->link.one_way_gbps = measured->one_way;
  netns->link.bidir_gbps = measured->bidir;
  netns->link.command = "iperf3 -c " + hosts.address(1) + " -t " + std::to_string(o.iperf_seconds) +
                        " -J [--bidir] from " + hosts.name(0) + " to a server in " + hosts.name(1);
  std::vector<int> host_of_rank;
  std::string labels;
  for (int r = 0; r < o.ranks; ++r) {
    host_of_rank.push_back(where->host(r));
    labels += (r ? "," : "") + std::to_string(where->host(r));
  }
  if (is_hierarchical(host_of_rank)) *transport = "hierarchical";
  netns->rank_placement = {"--hosts", labels};
  return std::nullopt;
}

// The argv of troupe's own rank program, its results in `dir` (--rank and --listen-host come per rank).
std::vector<std::string> troupe_rank_argv(const BenchAllreduceOptions& o, const std::string& dir,
                                          const std::string& transport, const std::vector<AllreduceCase>& cases,
                                          const std::vector<std::string>& rank_placement) {
  std::vector<std::string> argv = {self_executable(), "bench-rank", "--dir", dir, "--size", std::to_string(o.ranks),
                                   "--transport", o.netns ? "tcp" : transport, "--dtype", dtype_name(o.dtype),
                                   "--op", o.op, "--algorithm", o.algorithm, "--timeout", seconds(o.timeout),
                                   "--zero-copy", o.zero_copy ? "true" : "false"};
  for (const std::string& f : case_flags(cases)) argv.push_back(f);
  for (const std::string& f : rank_placement) argv.push_back(f);
  return argv;
}

// Runs troupe's ranks (`argv`, each listening on its placed address), their results in `dir`.
ImplementationRun run_troupe_ranks(const std::string& name, const std::string& detail, const std::string& dir,
                                   const std::vector<std::string>& argv, const BenchAllreduceOptions& o,
                                   const std::vector<AllreduceCase>& cases, const Placement& where, int* exit_code) {
  return run_implementation(name, detail, dir, o, cases,
                            [&](auto* out) {
                              return start_ranks(argv, o.ranks, dir, out, where, [&](int r) {
                                return std::vector<std::string>{"--listen-host", where.address(r)};
                              });
                            },
                            exit_code);
}

// --peers tls: troupe's ranks again (`argv`), their TCP mesh under TLS (a CA and a certificate made
// for the run). An error when those cannot be made.
Expected<ImplementationRun> run_troupe_tls(const BenchAllreduceOptions& o, const std::vector<AllreduceCase>& cases,
                                           const std::string& root, const std::vector<std::string>& argv,
                                           const Placement& where, int* exit_code) {
  const std::string tls_dir = root + "/tls";
  Status made = tls::make_ca(tls_dir, "bench");
  if (made.ok()) made = tls::issue_member(tls_dir, tls_dir, "rank", {}).status();
  if (!made.ok()) return made.with_context("--peers tls");
  const std::string tdir = root + "/troupe-tls";
  fs::create_directories(tdir);
  std::vector<std::string> targv = argv;
  targv[3] = tdir;  // --dir
  targv.insert(targv.end(), {"--tls-dir", tls_dir});
  return run_troupe_ranks("troupe+tls", "troupe Communicator::allreduce, TCP mesh under TLS 1.3", tdir, targv, o,
                          cases, where, exit_code);
}

// Whether every run that ran succeeded with right results; each failure and wrong result is
// reported (a peer that could not run only warned).
bool all_right(const char* cmd, const ImplementationRun& ours, const std::vector<ImplementationRun>& peers) {
  std::vector<const ImplementationRun*> runs = {&ours};
  for (const ImplementationRun& p : peers) runs.push_back(&p);
  bool ok = true;
  for (const ImplementationRun* run : runs) {
    if (run->status == "failed") {
      std::fprintf(stderr, "troupe %s: error: %s failed: %s\n", cmd, run->name.c_str(), run->detail.c_str());
      ok = false;
    }
    for (const CaseSummary& c : run->cases) {
      if (c.wrong == 0) continue;
      std::fprintf(stderr, "troupe %s: error: %s got %llu wrong elements at %zu bytes\n", cmd, run->name.c_str(),
                   static_cast<unsigned long long>(c.wrong), c.bytes);
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int run_bench_allreduce(const BenchAllreduceOptions& o) {
  const char* cmd = "bench allreduce";
  auto transport = resolve_transport(o.transport);
  if (!transport.ok()) return report_error(cmd, transport.status());
  if (o.netns) {
    if (o.transport == "shm") {
      return report_error(cmd, invalid_argument("--netns puts the ranks on two hosts: use --transport tcp or auto"));
    }
    if (o.ranks < 2) return report_error(cmd, invalid_argument("--netns needs --ranks 2 or more (one per host)"));
    *transport = "tcp";
  }
  const std::vector<AllreduceCase> cases = plan_cases(o);
  char tmpl[] = "/tmp/troupe-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    return report_error(cmd, io_error(std::string("cannot make a temp dir in /tmp: ") + std::strerror(errno)));
  }
  const std::string root = tmpl;

  // --netns: the two hosts (deleted when this function returns, however it returns) and their link.
  NetnsSetup netns;
  Placement where;
  where.ranks = o.ranks;
  if (o.netns) {
    if (auto failed = set_up_netns(cmd, o, root, &netns, &where, &*transport)) return *failed;
  }

  // troupe's own ranks first: without them there is nothing to compare with.
  int exit_code = 0;
  const std::string dir = root + "/troupe";
  fs::create_directories(dir);
  const std::vector<std::string> argv = troupe_rank_argv(o, dir, *transport, cases, netns.rank_placement);
  ImplementationRun ours = run_troupe_ranks("troupe", "troupe Communicator::allreduce", dir, argv, o, cases, where,
                                            &exit_code);
  if (ours.status != "ok") {
    std::fprintf(stderr, "troupe %s: error: %s\n  (logs kept in %s)\n", cmd, ours.detail.c_str(), root.c_str());
    return exit_code == kExitUsage ? kExitUsage : kExitFailure;
  }
  std::vector<ImplementationRun> peers;
  for (const std::string& name : o.peers) {
    if (name != "tls") {
      peers.push_back(run_peer(name, o, cases, root, where, &exit_code));
      continue;
    }
    auto tls_run = run_troupe_tls(o, cases, root, argv, where, &exit_code);
    if (!tls_run.ok()) return report_error(cmd, tls_run.status());
    peers.push_back(std::move(*tls_run));
  }

  const NetnsLink* shown = o.netns ? &netns.link : nullptr;
  if (o.json) std::printf("%s\n", to_json(o, *transport, ours, peers, shown).dump().c_str());
  else print_table(o, *transport, ours, peers, shown);

  // Exit 1 when anything that ran failed or got a wrong result; a peer that could not run only warns.
  if (!all_right(cmd, ours, peers)) {
    std::fprintf(stderr, "troupe %s: logs kept in %s\n", cmd, root.c_str());
    return kExitFailure;
  }
  std::error_code ignored;
  fs::remove_all(root, ignored);
  return 0;
}

}  // namespace troupe::cli
