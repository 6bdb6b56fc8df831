#include "dashboard/log_tail.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>

namespace troupe::dashboard {

Expected<Tail> tail_file(const std::string& path, const TailOptions& o) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return io_error("cannot open log file " + path + ": " + std::strerror(errno));
  Tail t;
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return io_error("cannot seek in " + path + ": " + std::strerror(errno));
  const long size = std::ftell(f.get());
  if (size < 0) return io_error("cannot tell the size of " + path + ": " + std::strerror(errno));
  t.file_bytes = static_cast<size_t>(size);
  const size_t start = t.file_bytes > o.max_scan_bytes ? t.file_bytes - o.max_scan_bytes : 0;
  t.scanned_all = start == 0;
  if (std::fseek(f.get(), static_cast<long>(start), SEEK_SET) != 0) {
    return io_error("cannot seek in " + path + ": " + std::strerror(errno));
  }
  std::string buf(t.file_bytes - start, '\0');
  const size_t got = std::fread(buf.data(), 1, buf.size(), f.get());
  if (got < buf.size() && std::ferror(f.get())) return io_error("cannot read " + path + ": " + std::strerror(errno));
  buf.resize(got);
  size_t pos = 0;
  if (start > 0) {  // the first line read is probably a partial one
    const size_t nl = buf.find('\n');
    pos = nl == std::string::npos ? buf.size() : nl + 1;
  }
  std::deque<std::string> kept;
  while (pos < buf.size()) {
    size_t end = buf.find('\n', pos);
    if (end == std::string::npos) end = buf.size();
    const std::string_view line(buf.data() + pos, end - pos);
    pos = end + 1;
    bool match = o.needles.empty();
    for (const std::string& n : o.needles) {
      if (line.find(n) != std::string_view::npos) {
        match = true;
        break;
      }
    }
    if (!match) continue;
    kept.emplace_back(line.size() > o.max_line_bytes ? std::string(line.substr(0, o.max_line_bytes)) + "..."
                                                     : std::string(line));
    if (kept.size() > o.lines) kept.pop_front();
  }
  t.lines.assign(kept.begin(), kept.end());
  return t;
}

std::string process_log_file(const std::string& log_dir, bool is_head, int64_t pid) {
  const std::string path = log_dir + "/troupe-" + (is_head ? "head" : "node") + "-" + std::to_string(pid) + ".log";
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? path : "";
}

}  // namespace troupe::dashboard
