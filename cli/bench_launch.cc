#include "cli/bench_launch.h"

#include <unistd.h>

#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/process.h"

namespace troupe::cli {

Expected<LaunchedProcess> launch(const std::string& name, const std::vector<std::string>& argv,
                                 const std::string& log, const std::vector<std::string>& env) {
  SpawnOptions o;
  o.argv = argv;
  o.log_file = log;
  o.env = env;
  o.detach = false;
  auto pid = spawn_process(o);
  if (!pid.ok()) return pid.status().with_context("starting " + name);
  return LaunchedProcess{name, *pid, log};
}

std::string log_tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += "\n    " + l;
  return out.empty() ? "\n    (its log " + path + " is empty)" : out;
}

GroupOutcome wait_all(const std::vector<LaunchedProcess>& processes, std::chrono::steady_clock::time_point deadline) {
  std::vector<bool> done(processes.size(), false);
  auto stop_others = [&] {
    for (size_t i = 0; i < processes.size(); ++i) {
      if (!done[i]) (void)stop_process(processes[i].pid, std::chrono::milliseconds(500));
    }
  };
  while (true) {
    size_t running = 0;
    for (size_t i = 0; i < processes.size(); ++i) {
      if (done[i]) continue;
      auto code = wait_process(processes[i].pid, std::chrono::milliseconds(0));
      if (!code.ok()) {
        if (code.status().code() == Code::timeout) {
          ++running;
          continue;
        }
        done[i] = true;  // not our child any more: nothing to wait for
        stop_others();
        return {code.status().with_context(processes[i].name), 1};
      }
      done[i] = true;
      if (*code != 0) {
        stop_others();
        const LaunchedProcess& p = processes[i];
        const std::string how = *code > 128 ? "killed by signal " + std::to_string(*code - 128)
                                             : "exit code " + std::to_string(*code);
        return {Status(Code::unavailable, p.name + " failed (" + how + "); the others were stopped. " +
                                              "The end of its log " + p.log + ":" + log_tail(p.log)),
                *code};
      }
    }
    if (running == 0) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names, tails;
      for (size_t i = 0; i < processes.size(); ++i) {
        if (done[i]) continue;
        names += (names.empty() ? "" : ", ") + processes[i].name;
        const LaunchedProcess& p = processes[i];
        if (tails.empty()) tails = " The end of " + p.name + "'s log " + p.log + ":" + log_tail(p.log);
      }
      stop_others();
      return {Status(Code::timeout, names + " still running at the deadline (--timeout); stopped." + tails), 0};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string find_in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace troupe::cli
