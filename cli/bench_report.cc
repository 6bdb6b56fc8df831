#include "cli/bench_report.h"

#include <cstdio>

namespace troupe::cli {
namespace {

const char* kTiming = "median over iterations of the slowest rank's time; a barrier before each iteration";

bool ran(const ImplementationRun& r) { return r.status == "ok"; }

nlohmann::json case_json(const CaseSummary& c, int ranks) {
  return {{"bytes", c.bytes},     {"count", c.count},
          {"iters", c.iters},     {"time_us", c.time_us},
          {"algbw_GBps", algbw_gbps(c.bytes, c.time_us)}, {"busbw_GBps", busbw_gbps(c.bytes, c.time_us, ranks)},
          {"wrong", c.wrong}};
}

}  // namespace

double algbw_gbps(size_t bytes, double time_us) { return time_us > 0 ? bytes / (time_us * 1e3) : 0; }

double busbw_gbps(size_t bytes, double time_us, int ranks) {
  return algbw_gbps(bytes, time_us) * 2.0 * (ranks - 1) / ranks;
}

double link_ratio(size_t bytes, double time_us, int ranks, double link_gbps) {
  return link_gbps > 0 ? busbw_gbps(bytes, time_us, ranks) * 8 / link_gbps : 0;
}

void print_table(const BenchAllreduceOptions& o, const std::string& transport, const ImplementationRun& ours,
                 const std::vector<ImplementationRun>& peers, const NetnsLink* link) {
  std::printf("# troupe bench allreduce: %d ranks, %s, %s, transport %s%s, algorithm %s\n", o.ranks,
              dtype_name(o.dtype), o.op.c_str(), transport.c_str(),
              transport == "shm" ? (o.zero_copy ? " (buffers in the shared arena)" : " (private buffers, staged)") : "",
              o.algorithm.c_str());
  std::printf("# time: %s; busbw = algbw * 2(n-1)/n\n", kTiming);
  if (link) {
    std::printf("# hosts: two network namespaces joined by a veth pair, ranks split between them\n");
    std::printf("# link: %.2f Gbit/s one way, %.2f Gbit/s per direction both ways at once (iperf3 --bidir), measured "
                "by %s\n# 1-way, bidir: busbw / those\n",
                link->one_way_gbps, link->bidir_gbps, link->command.c_str());
  }
  for (const ImplementationRun& p : peers) {
    if (ran(p)) std::printf("# peer %s: %s\n", p.name.c_str(), p.detail.c_str());
    else std::printf("# !!! peer %s %s: %s\n", p.name.c_str(), p.status == "failed" ? "FAILED" : "NOT RUN",
                     p.detail.c_str());
  }
  std::printf("#\n#%11s %11s %5s %10s %7s %7s %7s", "size", "count", "type", "time", "algbw", "busbw", "#wrong");
  if (link) std::printf(" %6s %6s", "1-way", "bidir");
  for (const ImplementationRun& p : peers) {
    if (ran(p)) std::printf(" | %10s %7s %7s %11s", p.name.c_str(), "busbw", "#wrong", (p.name + "/troupe").c_str());
  }
  std::printf("\n#%11s %11s %5s %10s %7s %7s %7s", "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (link) std::printf(" %6s %6s", "", "");
  for (const ImplementationRun& p : peers) {
    if (ran(p)) std::printf(" | %10s %7s %7s %11s", "(us)", "(GB/s)", "", "");
  }
  std::printf("\n");
  for (size_t k = 0; k < ours.cases.size(); ++k) {
    const CaseSummary& c = ours.cases[k];
    std::printf("%12zu %11zu %5s %10.1f %7.3f %7.3f %7llu", c.bytes, c.count, dtype_name(o.dtype), c.time_us,
                algbw_gbps(c.bytes, c.time_us), busbw_gbps(c.bytes, c.time_us, o.ranks),
                static_cast<unsigned long long>(c.wrong));
    if (link) {
      std::printf(" %5.0f%% %5.0f%%", 100 * link_ratio(c.bytes, c.time_us, o.ranks, link->one_way_gbps),
                  100 * link_ratio(c.bytes, c.time_us, o.ranks, link->bidir_gbps));
    }
    for (const ImplementationRun& p : peers) {
      if (!ran(p)) continue;
      const CaseSummary& q = p.cases[k];
      std::printf(" | %10.1f %7.3f %7llu %10.2fx", q.time_us, busbw_gbps(q.bytes, q.time_us, o.ranks),
                  static_cast<unsigned long long>(q.wrong), c.time_us > 0 ? q.time_us / c.time_us : 0.0);
    }
    std::printf("\n");
  }
}

nlohmann::json to_json(const BenchAllreduceOptions& o, const std::string& transport, const ImplementationRun& ours,
                       const std::vector<ImplementationRun>& peers, const NetnsLink* link) {
  nlohmann::json peer_status = nlohmann::json::object();
  for (const ImplementationRun& p : peers) peer_status[p.name] = {{"status", p.status}, {"detail", p.detail}};
  nlohmann::json results = nlohmann::json::array();
  for (size_t k = 0; k < ours.cases.size(); ++k) {
    nlohmann::json row = case_json(ours.cases[k], o.ranks);
    if (link) {
      row["link_ratio"] = link_ratio(ours.cases[k].bytes, ours.cases[k].time_us, o.ranks, link->one_way_gbps);
      row["link_ratio_bidir"] = link_ratio(ours.cases[k].bytes, ours.cases[k].time_us, o.ranks, link->bidir_gbps);
    }
    row["dtype"] = dtype_name(o.dtype);
    row["ranks"] = o.ranks;
    row["transport"] = transport;
    row["zero_copy"] = transport == "shm" && o.zero_copy;
    nlohmann::json by_peer = nlohmann::json::object();
    for (const ImplementationRun& p : peers) {
      if (!ran(p)) continue;
      nlohmann::json q = case_json(p.cases[k], o.ranks);
      q["ratio"] = ours.cases[k].time_us > 0 ? p.cases[k].time_us / ours.cases[k].time_us : 0.0;  // peer time / ours
      if (link) {
        q["link_ratio"] = link_ratio(p.cases[k].bytes, p.cases[k].time_us, o.ranks, link->one_way_gbps);
        q["link_ratio_bidir"] = link_ratio(p.cases[k].bytes, p.cases[k].time_us, o.ranks, link->bidir_gbps);
      }
      by_peer[p.name] = q;
    }
    row["peers"] = by_peer;
    results.push_back(row);
  }
  nlohmann::json doc = {{"benchmark", "allreduce"}, {"command", o.command_line}, {"ranks", o.ranks},
                        {"dtype", dtype_name(o.dtype)}, {"op", o.op}, {"transport", transport},
                        {"algorithm", o.algorithm}, {"timing", kTiming},
                        {"ratio", "peer time / troupe time: how many times faster troupe is"},
                        {"peers", peer_status}, {"results", results}};
  if (link) {
    doc["netns"] = {{"link_gbps", link->one_way_gbps}, {"link_bidir_gbps", link->bidir_gbps},
                    {"measured_by", link->command},
                    {"link_ratio", "busbw (GB/s) * 8 / link_gbps: the fraction of the one-way link the all-reduce "
                                   "kept busy in each direction"},
                    {"link_ratio_bidir", "busbw (GB/s) * 8 / link_bidir_gbps: the same against iperf3 --bidir, "
                                         "which like an all-reduce sends both ways at once"}};
  }
  return doc;
}

}  // namespace troupe::cli
