#include "cli/progress_bar.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace troupe::cli {

ProgressBar::ProgressBar(bool enabled, int64_t interval_ms)
    : tty_(::isatty(STDERR_FILENO) == 1), enabled_(enabled), interval_(interval_ms) {}

void ProgressBar::update(const std::string& label, int64_t done, int64_t total, const std::string& status,
                         bool force) {
  if (!enabled_ || !tty_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && drawn_ && now - last_ < interval_) return;
  last_ = now;
  constexpr int kWidth = 28;
  const double frac = total > 0 ? static_cast<double>(done) / total : 0.0;
  const int fill = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(fill), '#');
  bar.append(static_cast<size_t>(kWidth - fill), '.');
  std::fprintf(stderr, "\r\033[K%s [%s] %3d%% %s", label.c_str(), bar.c_str(), static_cast<int>(frac * 100),
               status.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::println(const std::string& line) {
  if (!enabled_) return;
  if (tty_ && drawn_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  drawn_ = false;
}

void ProgressBar::finish() {
  if (enabled_ && tty_ && drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

std::string format_count(double value) {
  std::string digits = std::to_string(std::llround(value));
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

}  // namespace troupe::cli
