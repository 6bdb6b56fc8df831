// Bounded tails of log files for /api/logs: the last lines of a file that contain any of some
// needles, reading at most the last `max_scan_bytes` of it (so a huge log costs a bounded read),
// each line cut to `max_line_bytes`. No exceptions; a file that cannot be read is an error naming it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::dashboard {

struct TailOptions {
  size_t lines = 200;                      // the newest matching lines to keep
  std::vector<std::string> needles;        // a line is kept when it contains one of them; none: every line
  size_t max_scan_bytes = 4 << 20;         // read at most this much from the end of the file
  size_t max_line_bytes = 2000;            // longer lines are cut (and end with "...")
};

struct Tail {
  std::vector<std::string> lines;          // oldest first
  bool scanned_all = true;                 // false: the file is longer than max_scan_bytes
  size_t file_bytes = 0;
};

// io_error when the file cannot be opened or read.
Expected<Tail> tail_file(const std::string& path, const TailOptions& options);

// The spdlog file of a cluster process in `log_dir` (core/logging.h: "troupe-<command>-<pid>.log"
// with command head or node), or "" when none exists.
std::string process_log_file(const std::string& log_dir, bool is_head, int64_t pid);

}  // namespace troupe::dashboard
