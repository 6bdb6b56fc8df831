// The shared-memory transport's send/recv (collectives/shm_transport.h): one single-producer
// single-consumer byte ring per ordered pair of ranks. The sender copies into free space and
// advances `head`, the receiver copies out and advances `tail`; each rings the other's bell so a
// sleeping peer wakes. send_recv moves both directions in one loop, so two ranks sending large
// buffers to each other never deadlock on full rings.
#include "collectives/shm_transport.h"

#include <algorithm>
#include <cstring>

#include "collectives/shm_collectives.h"

namespace troupe::collectives {

namespace {

using shm::WaitOutcome;

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(std::unique_ptr<shm::Segment> segment) : state_(std::move(segment)), native_(state_) {}
  ~ShmTransport() override {
    // Peers waiting on this rank see it closed at once rather than at their deadline.
    state_.segment->control(rank()).closed.store(1);
    state_.waiter.ring_all();
  }

  int rank() const override { return state_.rank(); }
  int label(int r) const { return state_.segment->label(r); }  // how errors name rank r
  int size() const override { return state_.size(); }
  std::string kind() const override { return "shm"; }
  NativeCollectives* native() override { return &native_; }

  void abort(const Status& error) override {
    (void)state_.fail(error);
    state_.waiter.abort(error);
  }
  // Only the group's abort word (atomic, in the segment; every wait checks it at least every
  // 10 ms): the rank's own state is its calling thread's.
  void interrupt(const Status& why) override { state_.waiter.abort(why); }

  Status send(int to, const void* data, size_t bytes, Clock::time_point deadline) override {
    return send_recv(to, data, bytes, to, nullptr, 0, deadline);
  }
  Status recv(int from, void* data, size_t bytes, Clock::time_point deadline) override {
    return send_recv(from, nullptr, 0, from, data, bytes, deadline);
  }
  Status send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data, size_t recv_bytes,
                   Clock::time_point deadline) override;

 private:
  // Copies what fits of `data` into the ring to `to`; returns the bytes moved.
  size_t push(int to, const char* data, size_t n);
  // Copies what arrived from `from`, up to n bytes; returns the bytes moved.
  size_t pull(int from, char* data, size_t n);
  size_t space_to(int to) {
    shm::MailboxHead& m = state_.segment->mailbox(rank(), to);
    return state_.segment->mailbox_bytes() - (m.head.load(std::memory_order_relaxed) - m.tail.load());
  }
  size_t arrived_from(int from) {
    shm::MailboxHead& m = state_.segment->mailbox(from, rank());
    return m.head.load() - m.tail.load(std::memory_order_relaxed);
  }
  Status explain(const WaitOutcome& why, int to, size_t sent, size_t sn, int from, size_t got, size_t rn);

  shm::RankState state_;
  shm::Collectives native_;
};

size_t ShmTransport::push(int to, const char* data, size_t n) {
  shm::MailboxHead& m = state_.segment->mailbox(rank(), to);
  const size_t cap = state_.segment->mailbox_bytes();
  const uint64_t head = m.head.load(std::memory_order_relaxed);
  const size_t take = std::min(n, cap - static_cast<size_t>(head - m.tail.load(std::memory_order_acquire)));
  if (take == 0) return 0;
  char* ring = state_.segment->mailbox_data(rank(), to);
  const size_t at = head % cap, first = std::min(take, cap - at);
  std::memcpy(ring + at, data, first);
  std::memcpy(ring, data + first, take - first);
  m.head.store(head + take, std::memory_order_release);
  state_.waiter.ring(to);
  return take;
}

size_t ShmTransport::pull(int from, char* data, size_t n) {
  shm::MailboxHead& m = state_.segment->mailbox(from, rank());
  const size_t cap = state_.segment->mailbox_bytes();
  const uint64_t tail = m.tail.load(std::memory_order_relaxed);
  const size_t take = std::min(n, static_cast<size_t>(m.head.load(std::memory_order_acquire) - tail));
  if (take == 0) return 0;
  const char* ring = state_.segment->mailbox_data(from, rank());
  const size_t at = tail % cap, first = std::min(take, cap - at);
  std::memcpy(data, ring + at, first);
  std::memcpy(data + first, ring, take - first);
  m.tail.store(tail + take, std::memory_order_release);
  state_.waiter.ring(from);
  return take;
}

Status ShmTransport::send_recv(int to, const void* send_data, size_t sn, int from, void* recv_data, size_t rn,
                               Clock::time_point deadline) {
  if (!state_.failed.ok()) return state_.failed;
  for (int peer : {to, from})
    if (peer < 0 || peer >= size() || peer == rank())
      return invalid_argument("peer rank " + std::to_string(peer) + " is not another rank of a group of " +
                              std::to_string(size()));
  if (state_.waiter.aborted()) return state_.fail(state_.waiter.abort_status());
  const char* sp = static_cast<const char*>(send_data);
  char* rp = static_cast<char*>(recv_data);
  size_t sent = 0, got = 0;
  while (sent < sn || got < rn) {
    const size_t pushed = sent < sn ? push(to, sp + sent, sn - sent) : 0;
    const size_t pulled = got < rn ? pull(from, rp + got, rn - got) : 0;
    sent += pushed;
    got += pulled;
    if (pushed + pulled > 0) continue;
    auto progress = [&] { return (sent < sn && space_to(to) > 0) || (got < rn && arrived_from(from) > 0); };
    auto blocking = [&](std::vector<int>& out) {
      if (sent < sn) out.push_back(to);
      if (got < rn && from != to) out.push_back(from);
    };
    WaitOutcome why = state_.waiter.wait(state_.waiter.own_bell(), progress, blocking, deadline);
    if (!why.ok()) return state_.fail(explain(why, to, sent, sn, from, got, rn));
  }
  return {};
}

Status ShmTransport::explain(const WaitOutcome& why, int to, size_t sent, size_t sn, int from, size_t got, size_t rn) {
  if (why.kind == WaitOutcome::aborted) return state_.waiter.abort_status();
  const bool receiving = got < rn && (why.rank == from || why.kind == WaitOutcome::timed_out);
  const int peer = receiving ? from : to;
  const std::string progress = receiving ? " with " + std::to_string(rn - got) + " of " + std::to_string(rn) +
                                               " bytes unsent (shm)"
                                         : " having accepted " + std::to_string(sent) + " of " +
                                               std::to_string(sn) + " bytes (shm)";
  switch (why.kind) {
    case WaitOutcome::exited:
      return unavailable("rank " + std::to_string(label(peer)) + " (pid " + std::to_string(why.pid) + ") exited" + progress);
    case WaitOutcome::closed:
      return unavailable("rank " + std::to_string(label(peer)) + " closed its transport" + progress);
    case WaitOutcome::timed_out:
      return receiving ? Status(Code::timeout, "rank " + std::to_string(label(from)) + " sent " + std::to_string(got) +
                                                   " of " + std::to_string(rn) + " bytes before the deadline (shm)")
                       : Status(Code::timeout, "rank " + std::to_string(label(to)) + " accepted " + std::to_string(sent) +
                                                   " of " + std::to_string(sn) + " bytes before the deadline (shm)");
    default: return internal_error("unexpected wait outcome in shm send_recv");
  }
}

}  // namespace

Expected<std::unique_ptr<Transport>> connect_shm_group(const ShmGroupOptions& options) {
  auto segment = shm::Segment::join(options);
  if (!segment) return segment.status();
  return std::unique_ptr<Transport>(std::make_unique<ShmTransport>(std::move(*segment)));
}

}  // namespace troupe::collectives
