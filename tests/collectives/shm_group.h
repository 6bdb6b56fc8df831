// Test helpers for the shared-memory transport: run one function per rank on threads of this
// process or in forked processes, each rank joining the group itself; unique segment names.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/shm_transport.h"
#include "tests/collectives/group.h"

namespace troupe::collectives::testing {

using ShmRankFn = std::function<Status(Communicator&)>;

// A name no other test (or concurrent test process) uses.
inline std::string unique_shm_name(const std::string& what) {
  static std::atomic<int> counter{0};
  return "test." + what + "." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

inline bool shm_segment_exists(const std::string& name) { return ::access(("/dev/shm/troupe." + name).c_str(), F_OK) == 0; }

inline ShmGroupOptions shm_options(const std::string& name, int size) {
  ShmGroupOptions o;
  o.name = name;
  o.size = size;
  o.timeout = std::chrono::seconds(20);
  return o;
}

// Runs fn on one thread per rank; each joins the group with `options` (rank filled in).
inline std::vector<Status> run_shm_threads(const ShmGroupOptions& options, const ShmRankFn& fn) {
  auto connect = [&](int r) {
    ShmGroupOptions mine = options;
    mine.rank = r;
    return connect_shm_group(mine);
  };
  return run_connected(options.size, connect, fn);
}

// What one forked rank reported: its exit (code, or 128 + signal), its Status text and code, and the
// steady-clock time (ns, system-wide) at which fn returned.
struct ForkedRank {
  pid_t pid = 0;
  int exit_code = -1;
  Code code = Code::ok;
  std::string message;
  int64_t returned_ns = 0;
  uint64_t sequence = 0;
};

// Confines the calling process to the first `cores` CPUs it may run on (0: leaves it alone), so
// that ranks outnumber cores on any host.
inline void confine_to_cores(int cores) {
  if (cores <= 0) return;
  cpu_set_t allowed, mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  for (int cpu = 0, kept = 0; cpu < CPU_SETSIZE && kept < cores; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) CPU_SET(cpu, &mine), ++kept;
  ::sched_setaffinity(0, sizeof mine, &mine);
}

// Forks one process per rank; each joins the group and runs fn, reports through a shared page and
// _exits (0 when fn returned ok). `watch(pids)` runs in the parent meanwhile (e.g. to kill one).
// `cores` > 0 confines every rank to that many CPUs before it joins (confine_to_cores).
inline std::vector<ForkedRank> run_shm_processes(const ShmGroupOptions& options, const ShmRankFn& fn,
                                                 const std::function<void(const std::vector<pid_t>&)>& watch = {},
                                                 int cores = 0) {
  struct Report {
    int32_t code;
    int64_t returned_ns;
    uint64_t sequence;
    char message[1000];
  };
  const size_t bytes = sizeof(Report) * options.size;
  auto* reports = static_cast<Report*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(reports, 0, bytes);
  std::vector<pid_t> pids;
  for (int r = 0; r < options.size; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      confine_to_cores(cores);
      ShmGroupOptions mine = options;
      mine.rank = r;
      Status st;
      uint64_t sequence = 0;
      auto transport = connect_shm_group(mine);
      if (!transport) {
        st = transport.status();
      } else {
        Communicator comm(std::move(*transport));
        st = fn(comm);
        sequence = comm.sequence();
      }
      Report& rep = reports[r];
      rep.code = static_cast<int32_t>(st.code());
      rep.returned_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
      rep.sequence = sequence;
      std::strncpy(rep.message, st.message().c_str(), sizeof rep.message - 1);
      ::_exit(st.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  if (watch) watch(pids);
  std::vector<ForkedRank> out(options.size);
  for (int r = 0; r < options.size; ++r) {
    int wstatus = 0;
    ::waitpid(pids[r], &wstatus, 0);
    out[r].pid = pids[r];
    out[r].exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    out[r].code = static_cast<Code>(reports[r].code);
    out[r].message = reports[r].message;
    out[r].returned_ns = reports[r].returned_ns;
    out[r].sequence = reports[r].sequence;
  }
  ::munmap(reports, bytes);
  return out;
}

}  // namespace troupe::collectives::testing
