// Processes of one benchmark run, started together and waited for together with one deadline: the
// ranks of `troupe bench allreduce` (troupe's, Gloo's) or the mpirun that starts MPI's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::cli {

struct LaunchedProcess {
  std::string name;  // "rank 1", "mpirun"
  pid_t pid = -1;
  std::string log;   // its stdout and stderr
};

// Starts `argv` (argv[0] a path) with output to `log`, in the caller's process group (so Ctrl-C
// reaches it too). io_error when it cannot be started.
Expected<LaunchedProcess> launch(const std::string& name, const std::vector<std::string>& argv,
                                 const std::string& log, const std::vector<std::string>& env = {});

// What became of a group: ok when every process exited 0. Otherwise `error` names the first process
// that failed (its exit code and the last lines of its log) or those still running at the deadline,
// and `exit_code` is the failed process's exit code (0 at the deadline).
struct GroupOutcome {
  Status error;
  int exit_code = 0;
};

// Waits for every process until `deadline`; the first failure, or the deadline, stops the others
// (SIGTERM, then SIGKILL) before returning. Every process is reaped.
GroupOutcome wait_all(const std::vector<LaunchedProcess>& processes, std::chrono::steady_clock::time_point deadline);

// The last `lines` non-empty lines of the file at `path`, each indented, for error messages.
std::string log_tail(const std::string& path, int lines = 6);

// The path of `program` in $PATH, or "" when it is not there.
std::string find_in_path(const std::string& program);

}  // namespace troupe::cli
