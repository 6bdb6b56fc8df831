// A one-line progress bar on stderr for long work: what is being done, how far, how fast, how long
// is left. Redraws at most every `interval_ms`; when stderr is not a terminal it prints one plain line
// per finished unit (epoch) instead, so logs and pipes stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace troupe::cli {

class ProgressBar {
 public:
  ProgressBar(bool enabled, int64_t interval_ms);
  // Redraws the bar (throttled) for `done` of `total` with a free-form status text.
  void update(const std::string& label, int64_t done, int64_t total, const std::string& status, bool force = false);
  // Ends the current bar line and prints `line` (e.g. an epoch summary) on a line of its own.
  void println(const std::string& line);
  void finish();

 private:
  bool tty_;
  bool enabled_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

// "1:05", "12:00:03"
std::string format_duration(double seconds);
// "48,113"
std::string format_count(double value);

}  // namespace troupe::cli
