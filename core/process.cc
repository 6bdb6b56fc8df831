#include "core/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace troupe {

Expected<std::string> find_program(const std::string& program) {
  if (program.empty()) return invalid_argument("an empty program name");
  if (program.find('/') != std::string::npos) return program;
  const char* env = std::getenv("PATH");
  const std::string path = env && *env ? env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > start ? path.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return not_found("cannot find '" + program + "' on PATH (" + path + "): install it or give its full path");
}

Expected<pid_t> spawn_process(const SpawnOptions& o) {
  if (o.argv.empty()) return invalid_argument("spawn_process: empty argv");
  // exec in the child must not search PATH (not async-signal-safe): the program is found here.
  auto program = find_program(o.argv[0]);
  if (!program.ok()) return program.status();
  int log_fd = ::open(o.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return io_error("cannot open log file '" + o.log_file + "': " + std::strerror(errno));
  const int in_fd = ::open(o.stdin_file.empty() ? "/dev/null" : o.stdin_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (in_fd < 0) {
    ::close(log_fd);
    return io_error("cannot open '" + o.stdin_file + "' as the child's input: " + std::strerror(errno));
  }
  // A pipe closed on exec tells the parent whether exec succeeded (EOF) or failed (errno bytes).
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(in_fd);
    ::close(log_fd);
    return io_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string exe = *program;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(in_fd);
    ::close(log_fd);
    ::close(report[0]);
    ::close(report[1]);
    return io_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    if (o.detach) ::setsid();
    ::dup2(in_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    for (const auto& e : o.env) ::putenv(const_cast<char*>(e.c_str()));
    ::execv(exe.c_str(), argv.data());
    int err = errno;
    ssize_t ignored = ::write(report[1], &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  ::close(in_fd);
  ::close(log_fd);
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof child_errno) {
    ::waitpid(pid, nullptr, 0);
    return io_error("cannot execute '" + o.argv[0] + "': " + std::strerror(child_errno));
  }
  return pid;
}

// True when /proc says the process has exited and waits to be reaped by its parent (state Z).
static bool is_zombie(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return false;
  auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  // Reap it first if it is our own exited child; an exited child of another parent is a zombie
  // until that parent reaps it, and counts as gone too.
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  return !is_zombie(pid);
}

Status stop_process(pid_t pid, std::chrono::milliseconds grace) {
  if (!process_alive(pid)) return {};
  ::kill(pid, SIGTERM);
  auto wait_gone = [pid](std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!process_alive(pid)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return !process_alive(pid);
  };
  if (wait_gone(grace)) return {};
  ::kill(pid, SIGKILL);
  if (wait_gone(std::chrono::milliseconds(1000))) return {};
  return Status(Code::timeout, "process " + std::to_string(pid) + " did not exit after SIGTERM and SIGKILL");
}

Expected<int> wait_process(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return io_error("waiting for process " + std::to_string(pid) + ": " + std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::timeout, "process " + std::to_string(pid) + " still running after " +
                                       std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Expected<pid_t> read_pid_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found("pid file '" + path + "' does not exist");
  long pid = 0;
  if (!(f >> pid) || pid <= 0) return corrupt_data("pid file '" + path + "' does not hold a process id");
  return static_cast<pid_t>(pid);
}

Status write_pid_file(const std::string& path, pid_t pid) {
  std::ofstream f(path, std::ios::trunc);
  if (!(f << pid << "\n")) return io_error("cannot write pid file '" + path + "'");
  return {};
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "troupe";
  buf[n] = '\0';
  return buf;
}

}  // namespace troupe
