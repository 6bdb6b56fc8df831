// Spinning, futex sleeps, wake-ups, liveness and the abort word (collectives/shm_wait.h).
#include "collectives/shm_wait.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

namespace troupe::collectives::shm {

namespace {

constexpr auto kSlice = std::chrono::milliseconds(10);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Not FUTEX_PRIVATE: the word lives in a mapping shared between processes.
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000), static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

Waiter::Waiter(Segment& segment)
    : segment_(segment), rank_(segment.rank()), own_pid_(static_cast<int32_t>(::getpid())) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  spin_ns_ = static_cast<unsigned>(segment.size()) <= cores ? 50000 : 2000;
}

void Waiter::ring(int rank) {
  RankControl& c = segment_.control(rank);
  // seq_cst pairs with the sleeper's store of `sleeping` and load of `bell`: either it sees the
  // new bell value (and does not sleep) or we see it asleep (and wake it).
  c.bell.fetch_add(1);
  if (c.sleeping.load() != 0) futex_wake_all(&c.bell);
}

void Waiter::ring_all() {
  for (int r = 0; r < segment_.size(); ++r)
    if (r != rank_) ring(r);
}

WaitOutcome Waiter::wait(const std::function<bool()>& ready, const std::function<void(std::vector<int>&)>& pending,
                         Clock::time_point deadline) {
  // Spin first: a peer on another core usually answers within microseconds.
  const auto spin_until = Clock::now() + std::chrono::nanoseconds(spin_ns_);
  for (int i = 0;; ++i) {
    if (ready()) return {};
    if ((i & 63) == 63 && (Clock::now() >= spin_until || aborted())) break;
    cpu_relax();
  }
  RankControl& me = segment_.control(rank_);
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
    // Announce the sleep, then re-check: a ring after the check changes `bell` and FUTEX_WAIT
    // returns at once; a ring before it made ready() true.
    me.sleeping.store(1);
    const uint32_t seen = me.bell.load();
    if (!ready() && !aborted()) futex_wait(&me.bell, seen, std::min<Clock::duration>(kSlice, deadline - now));
    me.sleeping.store(0);
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
