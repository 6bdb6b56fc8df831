#include "gcs/node_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gcs/events.h"
#include "gcs/record_fields.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the helpers of this file

Expected<NodeProcessStats> measure_this_process(const std::string& node) {
  NodeProcessStats s;
  s.node = node;
  s.time_ms = now_ms();
  {  // /proc/self/stat: utime and stime (fields 14, 15) in clock ticks, after the ")" of the name
    std::ifstream in("/proc/self/stat");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = all.rfind(')');
    if (all.empty()) return io_error("reading /proc/self/stat");
    if (close == std::string::npos) return corrupt_data("/proc/self/stat has no ')' after the process name");
    std::istringstream rest(all.substr(close + 2));
    std::string field;
    long long utime = 0, stime = 0, threads = 0;
    for (int i = 3; i <= 20 && rest >> field; ++i) {  // field 3 is the state
      if (i == 14) utime = std::atoll(field.c_str());
      if (i == 15) stime = std::atoll(field.c_str());
      if (i == 20) threads = std::atoll(field.c_str());
    }
    const long ticks = ::sysconf(_SC_CLK_TCK);
    s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
    s.threads = threads;
  }
  {  // VmRSS in kB
    std::ifstream in("/proc/self/status");
    if (!in) return io_error("reading /proc/self/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("VmRSS:", 0) == 0) s.rss_bytes = std::atoll(line.c_str() + 6) * 1024;
  }
  DIR* fds = ::opendir("/proc/self/fd");
  if (!fds) return io_error("reading /proc/self/fd");
  while (dirent* e = ::readdir(fds)) {
    if (e->d_name[0] == '.') continue;
    ++s.open_fds;
    char target[PATH_MAX];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n > 0 && std::string(target, static_cast<size_t>(n)).rfind("socket:", 0) == 0) ++s.sockets;
  }
  ::closedir(fds);
  s.open_fds -= 1;  // the directory listing's own descriptor
  return s;
}

std::string encode_node_stats(const NodeProcessStats& s) {
  return write([&](Packer& pk) {
    begin(pk, 7);
    put_str(pk, s.node);
    pk.pack_int64(s.time_ms);
    pk.pack_double(s.cpu_seconds);
    pk.pack_int64(s.rss_bytes);
    pk.pack_int64(s.open_fds);
    pk.pack_int64(s.sockets);
    pk.pack_int64(s.threads);
  });
}

Status decode_node_stats(const std::string& bytes, NodeProcessStats* out) {
  return read_record(bytes, "node stats", 7, out, [](Fields& f, NodeProcessStats& s) -> Status {
    TROUPE_RETURN_IF_ERROR(f.str("node", &s.node));
    TROUPE_RETURN_IF_ERROR(f.i64("time_ms", &s.time_ms));
    TROUPE_RETURN_IF_ERROR(f.f64("cpu_seconds", &s.cpu_seconds));
    TROUPE_RETURN_IF_ERROR(f.i64("rss_bytes", &s.rss_bytes));
    TROUPE_RETURN_IF_ERROR(f.i64("open_fds", &s.open_fds));
    TROUPE_RETURN_IF_ERROR(f.i64("sockets", &s.sockets));
    return f.i64("threads", &s.threads);
  });
}

Status put_node_stats(Store& store, const NodeProcessStats& s) {
  return store.put(kNodeStatsTable, s.node, encode_node_stats(s));
}

Expected<std::vector<NodeProcessStats>> list_node_stats(Store& store, int* unreadable) {
  auto rows = store.get_all(kNodeStatsTable);
  if (!rows.ok()) return rows.status();
  std::vector<NodeProcessStats> out;
  for (const auto& [key, bytes] : *rows) {
    NodeProcessStats s;
    if (decode_node_stats(bytes, &s).ok()) out.push_back(std::move(s));
    else if (unreadable) ++*unreadable;
  }
  return out;
}

}  // namespace troupe::gcs
