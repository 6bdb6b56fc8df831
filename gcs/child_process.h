// Child processes for the embedded redis-server (used by gcs/redis_server.cc): spawning with
// exec failures reported back, liveness, and termination with a deadline. POSIX only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::gcs {

// The first executable `name` in $PATH (or `name` itself when it contains a '/').
// not_found naming PATH when there is none.
Expected<std::string> find_executable(const std::string& name);

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the executable's path
  std::string output_file;        // stdout and stderr are appended here; stdin is /dev/null
  // false: a child in its own process group that gets SIGTERM when the spawning thread dies.
  // true: a grandchild in its own session (double fork), reparented away from this process.
  bool detach = false;
};

// Starts the program and returns its pid once it has exec'd. When exec fails (no such file, no
// permission) returns io_error with the reason and no process is left behind.
Expected<pid_t> spawn(const SpawnOptions& options);

// Whether `pid` is a live (not zombie) process.
bool process_alive(pid_t pid);

// For an attached child: returns true and sets `*status` (as waitpid) if it has exited; never
// blocks.
bool child_exited(pid_t pid, int* status);

// Sends SIGTERM, waits up to `timeout` for the process to end, then SIGKILL and waits again
// (bounded). `is_child`: reap it with waitpid; otherwise poll its liveness. ok when it is gone;
// timeout when even SIGKILL did not end it within 5 s (a process stuck in the kernel).
Status terminate_process(pid_t pid, bool is_child, std::chrono::milliseconds timeout);

// The last `n` non-empty lines of a text file, joined with " | " (for error messages).
std::string last_lines(const std::string& path, int n);

// "exited with status 1" / "was killed by signal 9", from a waitpid status.
std::string describe_exit(int status);

}  // namespace troupe::gcs
