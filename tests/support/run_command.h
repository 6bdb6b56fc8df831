// Runs a shell command for integration tests and captures what a user would see: exit code,
// stdout and stderr, separately. Commands are wrapped in `timeout` so a hung program fails the test
// instead of hanging the suite.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace troupe::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
  std::string both() const { return out + err; }
  // The last non-empty line of stdout.
  std::string last_line() const {
    std::istringstream is(out);
    std::string line, last;
    while (std::getline(is, line)) {
      if (!line.empty()) last = line;
    }
    return last;
  }
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `command` through /bin/sh with a deadline of `timeout_s` seconds (exit code 124 when it ran out).
inline CommandResult run_command(const std::string& command, int timeout_s = 300) {
  char out_path[] = "/tmp/troupe-test-out-XXXXXX";
  char err_path[] = "/tmp/troupe-test-err-XXXXXX";
  int fo = mkstemp(out_path), fe = mkstemp(err_path);
  if (fo >= 0) close(fo);
  if (fe >= 0) close(fe);
  std::string full = "timeout " + std::to_string(timeout_s) + " sh -c '" + command + "' </dev/null >" + out_path +
                     " 2>" + err_path;
  int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::remove(out_path);
  std::remove(err_path);
  return r;
}

// The troupe binary of this build.
inline std::string troupe_binary() { return std::string(TROUPE_BINARY_DIR) + "/bin/troupe"; }

// Calls `done` every `period` until it returns true or `timeout` passes; returns its last answer.
inline bool poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds period = std::chrono::milliseconds(100)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(period);
  }
}

}  // namespace troupe::testing
