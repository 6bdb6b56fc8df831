#include "gcs/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/durable_file.h"

namespace troupe::gcs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using Fd = UniqueFd;  // closes a file descriptor on scope exit

// A message from the forked side to the parent: 'P' + pid of the grandchild, or 'E' + errno of a
// failed exec/fork. 5 bytes, so each write is atomic on a pipe.
void report(int fd, char tag, int value) {
  char msg[1 + sizeof(int)];
  msg[0] = tag;
  std::memcpy(msg + 1, &value, sizeof(int));
  ssize_t n = ::write(fd, msg, sizeof msg);
  (void)n;
}

// In the child, after fork: only async-signal-safe calls.
[[noreturn]] void exec_child(char* const* argv, int null_fd, int out_fd, int report_fd) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  if (::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0) {
    report(report_fd, 'E', errno);
    ::_exit(127);
  }
  ::execv(argv[0], argv);
  report(report_fd, 'E', errno);
  ::_exit(127);
}

}  // namespace

Expected<std::string> find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return not_found(name + " is not an executable file (" + std::strerror(errno) + ")");
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return not_found(name + " not found in PATH (" + (path ? path : "unset") +
                   ") — install it (Debian: apt-get install redis-server) or give its path");
}

Expected<pid_t> spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return invalid_argument("spawn: empty argv");
  // Everything that allocates happens before fork: the child of a threaded parent may only make
  // async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Fd out(::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (out.fd < 0) return io_error("cannot open " + options.output_file + " for writing: " + std::strerror(errno));
  Fd null_in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  int p[2];
  if (null_in.fd < 0 || ::pipe2(p, O_CLOEXEC) != 0) return io_error(std::string("spawn: ") + std::strerror(errno));
  Fd rd(p[0]), wr(p[1]);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) return io_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    if (!options.detach) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
      exec_child(argv.data(), null_in.fd, out.fd, wr.fd);
    }
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild < 0) {
      report(wr.fd, 'E', errno);
      ::_exit(1);
    }
    if (grandchild > 0) {
      report(wr.fd, 'P', static_cast<int>(grandchild));
      ::_exit(0);
    }
    exec_child(argv.data(), null_in.fd, out.fd, wr.fd);
  }

  // The pipe reaches EOF once every writer exec'd (close-on-exec) or exited.
  ::close(wr.fd);
  wr.fd = -1;
  pid_t result = options.detach ? -1 : pid;
  int exec_errno = 0;
  const auto deadline = Clock::now() + milliseconds(10000);
  char msg[1 + sizeof(int)];
  size_t have = 0;
  while (Clock::now() < deadline) {
    pollfd pf{rd.fd, POLLIN, 0};
    if (::poll(&pf, 1, 100) <= 0) continue;
    const ssize_t n = ::read(rd.fd, msg + have, sizeof msg - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += static_cast<size_t>(n);
    if (have < sizeof msg) continue;
    int value = 0;
    std::memcpy(&value, msg + 1, sizeof(int));
    if (msg[0] == 'P') result = value;
    if (msg[0] == 'E') exec_errno = value;
    have = 0;
  }
  if (options.detach) {
    int status = 0;
    ::waitpid(pid, &status, 0);  // the intermediate child exits right after forking
  }
  if (exec_errno != 0 || result <= 0) {
    if (!options.detach) {
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
    return io_error("cannot run " + options.argv[0] + ": " +
                    (exec_errno ? std::strerror(exec_errno) : "the process did not report its start"));
  }
  return result;
}

bool child_exited(pid_t pid, int* status) {
  return ::waitpid(pid, status, WNOHANG) == pid;
}

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  // A zombie still answers kill(0); its state in /proc/<pid>/stat is 'Z'.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return true;  // no /proc: trust kill
  return text[close_paren + 2] != 'Z';
}

Status terminate_process(pid_t pid, bool is_child, milliseconds timeout) {
  if (pid <= 0) return {};
  auto gone = [&] {
    int status = 0;
    return is_child ? (child_exited(pid, &status) || (::kill(pid, 0) != 0 && errno == ESRCH)) : !process_alive(pid);
  };
  auto wait_gone = [&](milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (gone()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return gone();
  };
  if (gone()) return {};
  ::kill(pid, SIGTERM);
  if (wait_gone(timeout)) return {};
  ::kill(pid, SIGKILL);
  if (wait_gone(milliseconds(5000))) return {};
  return Status(Code::timeout, "process " + std::to_string(pid) + " did not exit even after SIGKILL within 5 s");
}

std::string last_lines(const std::string& path, int n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "(no log at " + path + ")";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > 16384 ? size - 16384 : 0;
  in.seekg(from);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += (out.empty() ? "" : " | ") + lines[i];
  }
  return out.empty() ? "(log is empty)" : out;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace troupe::gcs
