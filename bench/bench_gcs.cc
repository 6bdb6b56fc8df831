// bench_gcs: GCS write throughput (Table<NodeRecord>::put one by one, and Table::put_many
// pipelined) against redis-benchmark's SET on the same embedded redis-server, in one invocation.
//
//   build/bin/bench_gcs                       # table for docs/benchmarks.md
//   build/bin/bench_gcs -n 50000 --batch 200 --reps 5 --json gcs.json
//
// Shaped like nccl-tests: one record per case, one driver that times it and then checks what it
// wrote (every record is listed back and one is compared field by field). Each case writes to its
// own key prefix. The peer (redis-benchmark) runs as a child process on the same server with one
// connection (-c 1), with and without pipelining (-P batch), and with its default 50 connections,
// at the value size of an encoded NodeRecord (-d). A Table::put is one HSET plus one PUBLISH
// (the change notification) in one round trip, so the ratio to SET is of two commands against one.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/bench_common.h"
#include "gcs/events.h"
#include "gcs/redis_server.h"
#include "gcs/redis_store.h"
#include "gcs/tables.h"

using namespace troupe;
using namespace troupe::gcs;
using troupe::bench::Clock;
using troupe::bench::seconds_since;

namespace {

struct Record {
  std::string name;
  double per_second = 0;
  bool correct = false;
  std::string note;
};

NodeRecord make_node(int i) {
  NodeRecord r;
  r.id = NodeId::random();
  r.address = "10.0.0." + std::to_string(i % 250) + ":4242";
  r.hostname = "host-" + std::to_string(i);
  r.pid = 1000 + i;
  r.version = "0.1.0";
  r.total = {64, 8, 512LL << 30};
  r.gpus = {{0, "NVIDIA H100", 80LL << 30}};
  r.last_heartbeat_ms = now_ms();
  return r;
}

// Lists the table back: `n` records, and `probe` among them unchanged.
bool verify(Store& store, size_t n, const NodeRecord& probe, std::string* why) {
  Table<NodeRecord> table(store);
  auto all = table.list();
  if (!all.ok()) return *why = all.status().to_string(), false;
  if (all->size() != n) return *why = std::to_string(all->size()) + " records, expected " + std::to_string(n), false;
  auto got = table.get(probe.id.hex());
  if (!got.ok()) return *why = got.status().to_string(), false;
  if (got->hostname != probe.hostname || got->pid != probe.pid || got->gpus.size() != 1) {
    return *why = "record " + probe.id.hex() + " came back different", false;
  }
  return true;
}

Record bench_table(const RedisServer& server, const std::string& prefix, int n, int batch) {
  Record rec;
  rec.name = batch == 1 ? "Table<NodeRecord>::put" : "Table<NodeRecord>::put_many (batch " + std::to_string(batch) + ")";
  RedisStoreOptions o;
  o.redis = server.client_options();
  o.prefix = prefix;
  auto store = RedisStore::connect(o);
  if (!store.ok()) return rec.note = store.status().to_string(), rec;
  std::vector<NodeRecord> nodes;
  nodes.reserve(n);
  for (int i = 0; i < n; ++i) nodes.push_back(make_node(i));
  Table<NodeRecord> table(**store);
  const auto t0 = Clock::now();
  for (int i = 0; i < n; i += batch) {
    Status st;
    if (batch == 1) {
      st = table.put(nodes[i]);
    } else {
      std::vector<NodeRecord> chunk(nodes.begin() + i, nodes.begin() + std::min(n, i + batch));
      st = table.put_many(chunk);
    }
    if (!st.ok()) return rec.note = st.to_string(), rec;
  }
  rec.per_second = n / seconds_since(t0);
  rec.correct = verify(**store, static_cast<size_t>(n), nodes[n / 2], &rec.note);
  return rec;
}

// Runs redis-benchmark against the server and returns its SET requests per second.
Record bench_peer(const RedisServer& server, int n, int clients, int pipeline, size_t value_bytes) {
  Record rec;
  rec.name = "redis-benchmark SET -c " + std::to_string(clients) + " -P " + std::to_string(pipeline);
  const std::string cmd = "timeout 300 redis-benchmark -h " + server.host() + " -p " + std::to_string(server.port()) +
                          " -a " + server.password() + " -t set -n " + std::to_string(n) + " -c " +
                          std::to_string(clients) + " -P " + std::to_string(pipeline) + " -d " +
                          std::to_string(value_bytes) + " -q 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return rec.note = "cannot run redis-benchmark", rec;
  std::string out;
  char buf[4096];
  while (size_t k = std::fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  const int status = ::pclose(p);
  // -q prints "SET: 123456.79 requests per second, p50=..." (after \r-separated progress lines).
  const size_t at = out.rfind("SET: ");
  if (status != 0 || at == std::string::npos) return rec.note = "redis-benchmark failed: " + out, rec;
  rec.per_second = std::strtod(out.c_str() + at + 5, nullptr);
  rec.correct = rec.per_second > 0;
  return rec;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gcs: GCS writes/s against redis-benchmark on the same embedded redis-server"};
  int n = 20000, batch = 100, reps = 3;
  std::string json_path;
  app.add_option("-n", n, "records (and SETs) per case")->check(CLI::Range(100, 10000000));
  app.add_option("--batch", batch, "records per pipelined put_many / redis-benchmark -P")->check(CLI::Range(2, 10000));
  app.add_option("--reps", reps, "rounds of every case (median and best are printed)")->check(CLI::Range(1, 100));
  app.add_option("--json", json_path, "also write the results as JSON here");
  CLI11_PARSE(app, argc, argv);

  const std::string dir = (std::filesystem::temp_directory_path() / ("troupe-bench-gcs-" + std::to_string(::getpid()))).string();
  int rc = 0;
  {
    RedisServerOptions so;
    so.session_dir = dir;
    auto server = RedisServer::start(so);
    if (!server.ok()) {
      std::fprintf(stderr, "error: %s\n", server.status().to_string().c_str());
      return 1;
    }
    const size_t value_bytes = encode(make_node(0)).size();
    std::printf("# %s\n# cpu: %s\n# redis-server on %s:%d (appendonly yes, appendfsync everysec), "
                "n = %d, batch = %d, reps = %d, NodeRecord = %zu bytes\n",
                bench::command_line(argc, argv).c_str(), bench::cpu_model().c_str(), (*server)->host().c_str(),
                (*server)->port(), n, batch, reps, value_bytes);

    // --reps rounds of every case, interleaved so that load from other processes hits all alike.
    const int kCases = 5;
    std::vector<Record> recs(kCases);
    std::vector<std::vector<double>> rates(kCases);
    for (int rep = 0; rep < reps; ++rep) {
      const std::string r = std::to_string(rep);
      Record round[kCases] = {bench_table(**server, "bench-put-" + r, n, 1),
                              bench_peer(**server, n, 1, 1, value_bytes),
                              bench_table(**server, "bench-put-many-" + r, n, batch),
                              bench_peer(**server, n, 1, batch, value_bytes),
                              bench_peer(**server, n, 50, 1, value_bytes)};
      for (int c = 0; c < kCases; ++c) {
        if (rep == 0 || !round[c].correct) recs[c] = round[c];
        rates[c].push_back(round[c].per_second);
      }
    }
    for (int c = 0; c < kCases; ++c) recs[c].per_second = bench::median(rates[c]);

    // Ratios of medians: each GCS case against the peer with the same connections and pipelining.
    const double ratio_put = recs[1].per_second > 0 ? recs[0].per_second / recs[1].per_second : 0;
    const double ratio_many = recs[3].per_second > 0 ? recs[2].per_second / recs[3].per_second : 0;
    std::printf("\n%-42s %12s %12s %6s  %s\n", "case", "median w/s", "best w/s", "check", "median vs redis-benchmark");
    for (int i = 0; i < kCases; ++i) {
      char vs[64] = "";
      if (i == 0) std::snprintf(vs, sizeof vs, "%.2fx of -c 1 -P 1", ratio_put);
      if (i == 2) std::snprintf(vs, sizeof vs, "%.2fx of -c 1 -P %d", ratio_many, batch);
      std::printf("%-42s %12.0f %12.0f %6s  %s\n", recs[i].name.c_str(), recs[i].per_second, bench::best(rates[i]),
                  recs[i].correct ? "ok" : "FAILED", vs);
      if (!recs[i].correct) {
        std::fprintf(stderr, "  %s: %s\n", recs[i].name.c_str(), recs[i].note.c_str());
        rc = 1;
      }
    }
    if (!json_path.empty()) {
      nlohmann::json j;
      j["command"] = bench::command_line(argc, argv);
      j["cpu"] = bench::cpu_model();
      j["record_bytes"] = value_bytes;
      for (int c = 0; c < kCases; ++c) {
        j["cases"].push_back({{"name", recs[c].name}, {"median_per_second", recs[c].per_second},
                              {"per_second", rates[c]}, {"ok", recs[c].correct}});
      }
      j["ratio_put"] = ratio_put;
      j["ratio_put_many"] = ratio_many;
      if (!bench::write_json(json_path, j)) rc = 1;
    }
  }  // the server stops here
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}
