// Child processes for the cluster CLI: start a program detached from the caller (its own session,
// output to a log file, outliving the CLI), check whether a pid is alive, and stop one with a
// deadline. Every wait is bounded.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe {

struct SpawnOptions {
  std::vector<std::string> argv;          // argv[0]: the program's path, or a name looked up on PATH
  std::string log_file;                   // stdout and stderr are appended here
  std::vector<std::string> env;           // extra NAME=VALUE entries
  std::string stdin_file;                 // the child's stdin (empty: /dev/null)
  bool detach = true;                     // new session (setsid): survives the caller's exit
};

// Starts the program and returns its pid. The child is not waited for: a detached child is
// re-parented to init when the caller exits. Fails (io_error) when the log file cannot be opened
// or the program cannot be executed (the exec error is reported, not just a dead child).
Expected<pid_t> spawn_process(const SpawnOptions& options);

// `program` as exec would run it: a name without '/' looked up in the directories of $PATH (the
// first executable file), anything else as given. not_found naming the program and the PATH
// searched when there is none.
Expected<std::string> find_program(const std::string& program);

// True when a process with this pid exists (and is not a zombie of ours).
bool process_alive(pid_t pid);

// Sends SIGTERM, waits up to `grace` for the process to exit, then SIGKILL and waits up to 1 s more.
// ok when the process is gone (or was already); timeout naming the pid otherwise.
Status stop_process(pid_t pid, std::chrono::milliseconds grace);

// Waits up to `timeout` for our child `pid` to exit and returns its exit code (128 + signal when a
// signal ended it). timeout naming the pid when it is still running; io_error when it is not our child.
Expected<int> wait_process(pid_t pid, std::chrono::milliseconds timeout);

// Reads a pid file (one decimal pid); not_found / corrupt_data name the file.
Expected<pid_t> read_pid_file(const std::string& path);
Status write_pid_file(const std::string& path, pid_t pid);

// The absolute path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace troupe
