// bench_scaling: weak scaling of data-parallel training of the MLP (784-256-128-10, Adam, a fixed
// batch per worker, one BLAS thread per worker), each worker its own process on this host, as the
// issue's benchmark asks.
//
//   sync:  samples/s for 1, 2, 4, 8 workers over shared memory (train_replica, gradients bucketed
//          as the job default) and efficiency = throughput(N) / (N x throughput(1)); beside it, in the
//          same invocation, PyTorch DDP over Gloo on the same model and batch (bench/peers/ddp_mlp.py,
//          when python3 can import torch), and the ratio; and the host's own ceiling: n processes
//          training alone, without communication (--no-alone skips it).
//   async: updates/s (pushes applied by the parameter servers) and the mean staleness of the applied
//          updates for 4 and 8 workers with --ps servers (processes too; TCP loopback).
//
//   build/bin/bench_scaling --workers 1,2,4,8 --steps 200 --runs 3
//   build/bin/bench_scaling --strategy async --workers 4,8 --ps 2
//
// Each configuration runs --runs times, interleaved; the table gives medians. The data is the real
// Fashion-MNIST training set (loaded once, shared by the forked workers).
#include <CLI/CLI.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "collectives/shm_transport.h"
#include "core/config.h"
#include "data/feed/batch_feed.h"
#include "kernels/cpu/blas_info.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/ps/async_worker.h"
#include "trainers/ps/ps_client.h"
#include "trainers/ps/ps_job.h"
#include "trainers/ps/ps_server.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;

namespace {

struct Flags {
  std::string strategy = "sync";
  std::vector<int> workers = {1, 2, 4, 8};
  int steps = 200;
  int batch = 128;  // per worker
  int runs = 3;
  int ps = 2;
  std::string peer = TROUPE_SOURCE_DIR "/bench/peers/ddp_mlp.py";
  std::string python = "/usr/bin/python3";  // Debian's (python3-torch), not a virtualenv's that may lack torch
  int64_t bucket_bytes = -1;  // as a job: -1 = 256 KiB with 2 cores per worker, else 0
  bool alone = true;           // sync: also n processes without communication (the host's ceiling)
  bool json = false;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Runs `body(i)` in `n` forked children; each writes one line to its pipe. Returns the lines, or
// an error when a child fails or does not answer within `timeout`.
Expected<std::vector<std::string>> fork_all(int n, const std::function<std::string(int)>& body,
                                            std::chrono::seconds timeout) {
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int p[2];
    if (::pipe(p) != 0) return io_error("pipe");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      std::string line = body(i) + "\n";
      if (::write(p[1], line.data(), line.size()) < 0) _exit(3);
      _exit(0);
    }
    ::close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  std::vector<std::string> out(static_cast<size_t>(n));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Status failed;
  for (int i = 0; i < n; ++i) {
    int status = 0;
    while (::waitpid(pids[i], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) ::kill(p, SIGKILL);
        return Status(Code::timeout, "worker " + std::to_string(i) + " did not finish in time");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    char buf[4096];
    ssize_t got = ::read(fds[i], buf, sizeof buf - 1);
    out[i] = got > 0 ? std::string(buf, static_cast<size_t>(got)) : "";
    ::close(fds[i]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = internal_error("worker " + std::to_string(i) + " failed");
  }
  if (!failed.ok()) return failed;
  return out;
}

TrainOptions options(const Flags& f, int workers) {
  TrainOptions o;
  o.epochs = 100;
  o.batch_size = f.batch * workers;
  o.max_steps = f.steps;
  o.evaluate_each_epoch = false;
  o.cpu_threads = 1;
  return o;
}

// One sync job of `n` worker processes: the job's samples/s (training only).
Expected<double> sync_run(const Flags& f, const Dataset& train, const Dataset& test, int n, int run) {
  const std::string group = "scaling-" + std::to_string(::getpid()) + "-" + std::to_string(n) + "-" + std::to_string(run);
  auto lines = fork_all(n, [&](int rank) -> std::string {
    TrainOptions o = options(f, n);
    Replica replica;
    replica.bucket_bytes = static_cast<size_t>(
        f.bucket_bytes >= 0 ? f.bucket_bytes : (std::thread::hardware_concurrency() >= 2u * n ? 256 << 10 : 0));
    std::unique_ptr<collectives::Communicator> comm;
    if (n > 1) {
      collectives::ShmGroupOptions so;
      so.name = group;
      so.rank = rank;
      so.size = n;
      auto t = collectives::connect_shm_group(so);
      if (!t.ok()) return "error " + t.status().to_string();
      comm = std::make_unique<collectives::Communicator>(std::move(*t));
      replica.comm = comm.get();
    }
    auto r = train_replica(o, train, test, replica);
    if (!r.ok()) {
      std::fprintf(stderr, "worker %d: %s\n", rank, r.status().to_string().c_str());
      _exit(2);
    }
    return std::to_string(r->samples_per_second);
  }, std::chrono::seconds(600));
  if (!lines.ok()) return lines.status();
  return std::stod((*lines)[0]);
}

// The host's own ceiling for `n` workers: `n` processes each training its own replica at the
// per-worker batch with no communication at all; the sum of their samples/s. What n processes
// get beside each other (shared caches, memory bandwidth, the all-core clock) bounds any
// data-parallel job of n workers, troupe's and DDP's alike.
Expected<double> alone_run(const Flags& f, const Dataset& train, const Dataset& test, int n) {
  auto lines = fork_all(n, [&](int) -> std::string {
    auto r = train_replica(options(f, 1), train, test, Replica{});
    if (!r.ok()) _exit(2);
    return std::to_string(r->samples_per_second);
  }, std::chrono::seconds(600));
  if (!lines.ok()) return lines.status();
  double sum = 0;
  for (const std::string& l : *lines) sum += std::stod(l);
  return sum;
}

struct AsyncFigures {
  double updates_per_s = 0, staleness = 0;
};

// One async job: `servers` parameter-server processes, then `n` worker processes.
Expected<AsyncFigures> async_run(const Flags& f, const Dataset& train, const Dataset& test, int n) {
  // Servers: each forks, listens, writes its address to a pipe and serves until killed.
  std::vector<pid_t> server_pids;
  std::vector<std::string> addresses;
  for (int s = 0; s < f.ps; ++s) {
    int p[2];
    if (::pipe(p) != 0) return io_error("pipe");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ps::PsJobShape shape;
      shape.workers = n;
      shape.shards = f.ps;
      shape.train_examples = train.count;
      auto shard = ps::make_job_shard(options(f, n), DataSpec{train.features(), train.classes}, shape, s);
      if (!shard.ok()) _exit(2);
      ps::PsServerOptions so;
      so.job = "bench";
      auto server = ps::PsServer::start(std::move(*shard), so);
      if (!server.ok()) _exit(2);
      std::string line = (*server)->address() + "\n";
      if (::write(p[1], line.data(), line.size()) < 0) _exit(3);
      while (true) ::pause();
    }
    ::close(p[1]);
    char buf[256];
    ssize_t got = ::read(p[0], buf, sizeof buf - 1);
    ::close(p[0]);
    server_pids.push_back(pid);
    if (got <= 0) return internal_error("parameter server " + std::to_string(s) + " did not start");
    std::string a(buf, static_cast<size_t>(got));
    addresses.push_back(a.substr(0, a.find('\n')));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto lines = fork_all(n, [&](int rank) -> std::string {
    ps::PsClientOptions co;
    co.job = "bench";
    co.rank = rank;
    auto client = ps::connect_ps(addresses, co);
    if (!client.ok()) _exit(2);
    TrainOptions o = options(f, n);
    SliceFeed feed(train, o.seed, o.batch_size, rank, n);
    ps::PsWorkerReport report;
    auto r = ps::train_ps_worker(o, train, test, feed, {client->get(), rank, n, false}, {}, &report);
    if (!r.ok()) {
      std::fprintf(stderr, "worker %d: %s\n", rank, r.status().to_string().c_str());
      _exit(2);
    }
    std::ostringstream os;
    os << report.steps << " " << report.staleness.mean << " " << report.staleness.count;
    return os.str();
  }, std::chrono::seconds(600));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (pid_t p : server_pids) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  if (!lines.ok()) return lines.status();
  AsyncFigures out;
  int64_t steps = 0;
  double worst_mean = 0;
  for (const std::string& l : *lines) {
    std::istringstream is(l);
    int64_t s = 0, count = 0;
    double mean = 0;
    is >> s >> mean >> count;
    steps += s;
    worst_mean = std::max(worst_mean, mean);  // the last worker to end saw every update
  }
  out.updates_per_s = steps / seconds;  // wall time includes connecting: a slight underestimate
  out.staleness = worst_mean;
  return out;
}

// PyTorch DDP's samples/s for `n` workers, or -1 when the peer cannot run.
double ddp_run(const Flags& f, int n) {
  if (f.peer == "none") return -1;
  const std::string cmd = f.python + " " + f.peer + " --workers " + std::to_string(n) + " --steps " +
                          std::to_string(f.steps) + " --batch " + std::to_string(f.batch) + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[512];
  std::string out;
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  if (::pclose(p) != 0) return -1;
  auto j = nlohmann::json::parse(out, nullptr, false);
  return j.is_object() ? j.value("samples_per_second", -1.0) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::kernels::cpu::reexec_for_blas(argv);  // the workers' sgemm: OpenBLAS fell back to Prescott on the H200 host
  CLI::App app{"Weak scaling of sync training and async updates/s, worker processes on this host"};
  Flags f;
  app.add_option("--strategy", f.strategy, "sync or async")->check(CLI::IsMember({"sync", "async"}));
  app.add_option("--workers", f.workers, "Worker counts")->delimiter(',');
  app.add_option("--steps", f.steps, "Timed steps per worker");
  app.add_option("--batch", f.batch, "Batch per worker");
  app.add_option("--runs", f.runs, "Runs of each configuration (medians)");
  app.add_option("--ps", f.ps, "async: parameter servers");
  app.add_option("--peer", f.peer, "sync: the DDP peer script, or none");
  app.add_option("--python", f.python, "sync: the python3 that runs the peer (it must import torch)");
  app.add_option("--bucket-bytes", f.bucket_bytes, "sync: gradient bucket size (0: one all-reduce after backward)");
  app.add_flag("!--no-alone", f.alone, "sync: skip the n processes without communication (the host's ceiling)");
  app.add_flag("--json", f.json, "One JSON line at the end");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const char* env = std::getenv("TROUPE_DATASET_DIR");
  const std::string dir = env && *env ? env : TROUPE_DEFAULT_DATASET_DIR;
  auto train = load_fashion_mnist(dir, Split::train);
  auto test = load_fashion_mnist(dir, Split::test);
  if (!train.ok() || !test.ok()) {
    std::fprintf(stderr, "bench_scaling: Fashion-MNIST: %s\n", (train.ok() ? test.status() : train.status()).to_string().c_str());
    return 1;
  }
  nlohmann::json rows = nlohmann::json::array();
  if (f.strategy == "sync") {
    std::map<int, std::vector<double>> ours, ddp, alone;
    for (int run = 0; run < f.runs; ++run) {
      for (int n : f.workers) {
        auto s = sync_run(f, *train, *test, n, run);
        if (!s.ok()) {
          std::fprintf(stderr, "sync %d workers: %s\n", n, s.status().to_string().c_str());
          return 1;
        }
        ours[n].push_back(*s);
        double d = ddp_run(f, n);
        if (d > 0) ddp[n].push_back(d);
        double a = -1;
        if (f.alone) {
          auto c = alone_run(f, *train, *test, n);
          if (!c.ok()) {
            std::fprintf(stderr, "%d workers alone: %s\n", n, c.status().to_string().c_str());
            return 1;
          }
          a = *c;
          alone[n].push_back(a);
        }
        std::fprintf(stderr, "run %d, %d workers: troupe %.0f samples/s, DDP %.0f, alone %.0f\n", run + 1, n, *s, d, a);
      }
    }
    const double base = median(ours[f.workers.front()]) / f.workers.front();
    const double ddp_base = ddp.count(f.workers.front()) ? median(ddp[f.workers.front()]) / f.workers.front() : 0;
    std::printf("sync weak scaling, MLP 784-256-128-10, batch %d per worker, %d steps, buckets of %lld bytes (-1: auto), "
                "medians of %d, %u cores\n", f.batch, f.steps, static_cast<long long>(f.bucket_bytes), f.runs,
                std::thread::hardware_concurrency());
    const double alone_base = alone.count(f.workers.front()) ? median(alone[f.workers.front()]) / f.workers.front() : 0;
    std::printf("%8s %14s %11s %14s %11s %10s %14s %11s %13s\n", "workers", "troupe smp/s", "efficiency", "DDP smp/s",
                "efficiency", "troupe/DDP", "alone smp/s", "host ceil.", "troupe/alone");
    for (int n : f.workers) {
      const double m = median(ours[n]);
      const double d = ddp.count(n) ? median(ddp[n]) : 0;
      const double a = alone.count(n) ? median(alone[n]) : 0;
      // alone: n processes without communication (alone_run); "host ceil." is their efficiency, the
      // most any n-worker job gets on this host; troupe/alone what troupe's communication leaves of it.
      std::printf("%8d %14.0f %10.0f%% %14s %10s %10s %14s %10s %13s\n", n, m, 100 * m / (n * base),
                  d > 0 ? std::to_string(static_cast<int64_t>(d)).c_str() : "-",
                  d > 0 ? (std::to_string(static_cast<int>(100 * d / (n * ddp_base))) + "%").c_str() : "-",
                  d > 0 ? (std::to_string(m / d).substr(0, 4) + "x").c_str() : "-",
                  a > 0 ? std::to_string(static_cast<int64_t>(a)).c_str() : "-",
                  a > 0 ? (std::to_string(static_cast<int>(100 * a / (n * alone_base))) + "%").c_str() : "-",
                  a > 0 ? (std::to_string(static_cast<int>(100 * m / a)) + "%").c_str() : "-");
      rows.push_back({{"workers", n}, {"samples_per_second", m}, {"efficiency", m / (n * base)},
                      {"ddp_samples_per_second", d > 0 ? nlohmann::json(d) : nlohmann::json()},
                      {"alone_samples_per_second", a > 0 ? nlohmann::json(a) : nlohmann::json()}});
    }
  } else {
    std::map<int, std::vector<double>> ups, stale;
    for (int run = 0; run < f.runs; ++run) {
      for (int n : f.workers) {
        auto a = async_run(f, *train, *test, n);
        if (!a.ok()) {
          std::fprintf(stderr, "async %d workers: %s\n", n, a.status().to_string().c_str());
          return 1;
        }
        ups[n].push_back(a->updates_per_s);
        stale[n].push_back(a->staleness);
      }
    }
    std::printf("async, MLP 784-256-128-10, batch %d per worker, %d steps each, %d parameter servers, medians of %d, "
                "%u cores\n", f.batch, f.steps, f.ps, f.runs, std::thread::hardware_concurrency());
    std::printf("%8s %12s %16s\n", "workers", "updates/s", "mean staleness");
    for (int n : f.workers) {
      std::printf("%8d %12.0f %16.2f\n", n, median(ups[n]), median(stale[n]));
      rows.push_back({{"workers", n}, {"updates_per_second", median(ups[n])}, {"mean_staleness", median(stale[n])}});
    }
  }
  if (f.json) std::printf("%s\n", nlohmann::json{{"strategy", f.strategy}, {"rows", rows}}.dump().c_str());
  return 0;
}
