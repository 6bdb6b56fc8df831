// Spinning, futex sleeps, wake-ups, liveness and the abort word (collectives/shm_wait.h).
#include "collectives/shm_wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

namespace troupe::collectives::shm {

namespace {

// Longest sleep between checks of abort, deadline and liveness.
constexpr auto kSlice = std::chrono::milliseconds(10);
// Pause-spin before sleeping when every rank can have a core.
constexpr auto kPauseSpin = std::chrono::microseconds(50);
// Yield-spin before sleeping when ranks outnumber cores: long enough for the peers queued on this
// core to run to the barrier (8 ranks on 2 cores pass one in ~60 us), short enough that a rank
// idling in a long wait soon stops taking turns on the core.
constexpr auto kYieldSpin = std::chrono::microseconds(1000);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The cores this process may run on (its affinity mask: a cpuset or taskset narrows it).
unsigned usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

// Not FUTEX_PRIVATE: the word lives in a mapping shared between processes.
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000), static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// seq_cst pairs with the sleeper's increment of `sleepers` and load of `rings`: either it sees the
// new `rings` (and does not sleep) or we see it counted (and wake it).
void ring_bell(Bell& bell) {
  bell.rings.fetch_add(1);
  if (bell.sleepers.load() != 0) futex_wake_all(&bell.rings);
}

}  // namespace

Waiter::Waiter(Segment& segment)
    : segment_(segment),
      rank_(segment.rank()),
      own_pid_(static_cast<int32_t>(::getpid())),
      oversubscribed_(static_cast<unsigned>(segment.size()) > usable_cores()) {}

void Waiter::ring(int rank) { ring_bell(segment_.control(rank).bell); }

void Waiter::ring_barrier() { ring_bell(barrier_bell()); }

void Waiter::ring_all() {
  for (int r = 0; r < segment_.size(); ++r)
    if (r != rank_) ring(r);
  ring_barrier();
}

bool Waiter::spin(const std::function<bool()>& ready) {
  const auto until = Clock::now() + (oversubscribed_ ? kYieldSpin : kPauseSpin);
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if (oversubscribed_) {
      ::sched_yield();  // the peer we wait for may be queued on this core
      if ((i & 7) == 7 && (Clock::now() >= until || aborted())) return false;
    } else {
      cpu_relax();
      if ((i & 63) == 63 && (Clock::now() >= until || aborted())) return false;
    }
  }
}

WaitOutcome Waiter::wait(Bell& bell, const std::function<bool()>& ready,
                         const std::function<void(std::vector<int>&)>& pending, Clock::time_point deadline) {
  if (spin(ready)) return {};
  std::vector<int> waiting_for;
  while (true) {
    if (ready()) return {};
    if (aborted()) return {WaitOutcome::aborted};
    waiting_for.clear();
    pending(waiting_for);
    for (int r : waiting_for) {
      RankControl& peer = segment_.control(r);
      if (peer.closed.load() != 0) return {WaitOutcome::closed, r};
      const int32_t pid = peer.pid.load();
      if (pid != own_pid_ && process_gone(pid)) return {WaitOutcome::exited, r, pid};
    }
    const auto now = Clock::now();
    if (now >= deadline) return {WaitOutcome::timed_out};
    // Count ourselves asleep, then re-check: a ring after the check changes `rings` and FUTEX_WAIT
    // returns at once; a ring before it made ready() true.
    bell.sleepers.fetch_add(1);
    const uint32_t seen = bell.rings.load();
    if (!ready() && !aborted()) futex_wait(&bell.rings, seen, std::min<Clock::duration>(kSlice, deadline - now));
    bell.sleepers.fetch_sub(1);
  }
}

bool Waiter::aborted() const { return segment_.header().abort_state.load(std::memory_order_acquire) == 2; }

Status Waiter::abort_status() const {
  if (!aborted()) return {};
  const SegmentHeader& h = segment_.header();
  return Status(static_cast<Code>(h.abort_code), "rank " + std::to_string(h.abort_rank) + " aborted " +
                                                     std::string(h.abort_message, strnlen(h.abort_message, sizeof h.abort_message)));
}

void Waiter::abort(const Status& error) {
  SegmentHeader& h = segment_.header();
  uint32_t expected = 0;
  if (h.abort_state.compare_exchange_strong(expected, 1)) {  // first writer wins
    h.abort_rank = segment_.label(rank_);
    h.abort_code = static_cast<int32_t>(error.ok() ? Code::internal : error.code());
    const std::string& m = error.message();
    const size_t n = std::min(m.size(), sizeof h.abort_message - 1);
    std::memcpy(h.abort_message, m.data(), n);
    h.abort_message[n] = '\0';
    h.abort_state.store(2, std::memory_order_release);
  }
  ring_all();
}

}  // namespace troupe::collectives::shm
