#include "collectives/inproc_transport.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

namespace troupe::collectives {

namespace {

// One send: its bytes and the call that sent them.
struct Message {
  CallDescriptor call;
  std::vector<char> bytes;
};

// The bytes one rank sent to another and the receiver has not read yet.
struct Stream {
  std::deque<Message> messages;
  size_t front_offset = 0;  // bytes of messages.front() already read
};

// Everything sent to one rank, from every rank.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Stream> from;
};

}  // namespace

struct InprocGroup {
  explicit InprocGroup(int n) : size(n), inboxes(n), dead(n) {
    for (auto& box : inboxes) box.from.resize(n);
    for (auto& d : dead) d.store(false);
  }
  int size;
  std::vector<Inbox> inboxes;
  std::vector<std::atomic<bool>> dead;
  // The first abort: who gave up and why. Set once; read after `aborted` is seen true.
  std::atomic<bool> aborted{false};
  std::mutex abort_mu;
  int aborted_by = -1;
  uint64_t abort_sequence = 0;  // the call it gave up in
  Status abort_error;

  void wake_all() {
    for (auto& box : inboxes) {  // every waiter re-checks deaths and aborts
      std::lock_guard<std::mutex> lock(box.mu);
      box.cv.notify_all();
    }
  }
  void mark_dead(int rank) {
    dead[rank].store(true);
    wake_all();
  }
  // The abort `rank`, waiting in call `sequence`, must report; ok when none happened, when it is
  // its own, or when it is of a later call: its sender finished this one, so this rank still can.
  Status abort_seen_by(int rank, uint64_t sequence) {
    if (!aborted.load()) return {};
    std::lock_guard<std::mutex> lock(abort_mu);
    if (aborted_by == rank || abort_sequence > sequence) return {};
    return Status(abort_error.code(), "rank " + std::to_string(aborted_by) + " aborted " + abort_error.message());
  }
};

InprocTransport::InprocTransport(std::shared_ptr<InprocGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

InprocTransport::~InprocTransport() { close(); }

int InprocTransport::size() const { return group_->size; }

void InprocTransport::close() {
  if (failed_.ok()) failed_ = unavailable("rank " + std::to_string(rank_) + ": this transport is closed");
  if (!group_->dead[rank_].load()) group_->mark_dead(rank_);
}

void InprocTransport::abort(const Status& error) {
  if (failed_.ok()) failed_ = error;
  {
    std::lock_guard<std::mutex> lock(group_->abort_mu);
    if (group_->aborted_by >= 0) return;  // the group already knows why it stopped
    group_->aborted_by = rank_;
    group_->abort_sequence = call_.sequence;
    group_->abort_error = error;
    group_->aborted.store(true);
  }
  group_->wake_all();
}

void InprocTransport::interrupt(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    if (interrupted_.load()) return;
    interrupt_why_ = why;
    interrupted_.store(true);
  }
  Inbox& box = group_->inboxes[rank_];
  std::lock_guard<std::mutex> lock(box.mu);
  box.cv.notify_all();
}

Status InprocTransport::interrupted() {
  std::lock_guard<std::mutex> lock(interrupt_mu_);
  return fail(interrupt_why_);
}

Status InprocTransport::fail(Status s) {
  if (failed_.ok()) failed_ = s;
  return s;
}

Status InprocTransport::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= group_->size || peer == rank_)
    return invalid_argument(std::string(what) + ": peer rank " + std::to_string(peer) + " is not another rank of a group of " +
                            std::to_string(group_->size));
  return {};
}

Status InprocTransport::send(int to, const void* data, size_t bytes, Clock::time_point /*deadline*/) {
  if (!failed_.ok()) return failed_;
  TROUPE_RETURN_IF_ERROR(check_peer(to, "send"));
  if (bytes == 0) return {};  // nothing the peer waits for, even when it has finished and left
  if (group_->dead[to].load()) {
    // A peer that gave up aborted the group before it left: that says why, its absence does not.
    if (Status aborted = group_->abort_seen_by(rank_, call_.sequence); !aborted.ok()) return fail(aborted);
    return fail(unavailable("rank " + std::to_string(to) + " closed its transport (inproc)"));
  }
  Inbox& box = group_->inboxes[to];
  const char* p = static_cast<const char*>(data);
  Message message{call_, std::vector<char>(p, p + bytes)};
  {
    std::lock_guard<std::mutex> lock(box.mu);
    box.from[rank_].messages.push_back(std::move(message));
  }
  box.cv.notify_all();
  return {};
}

Status InprocTransport::recv(int from, void* data, size_t bytes, Clock::time_point deadline) {
  if (!failed_.ok()) return failed_;
  if (interrupted_.load()) return interrupted();
  TROUPE_RETURN_IF_ERROR(check_peer(from, "recv"));
  if (bytes == 0) return {};
  Inbox& box = group_->inboxes[rank_];
  Stream& stream = box.from[from];
  char* out = static_cast<char*>(data);
  size_t got = 0;
  std::unique_lock<std::mutex> lock(box.mu);
  while (got < bytes) {
    // Take whatever has arrived, message by message.
    while (got < bytes && !stream.messages.empty()) {
      const CallDescriptor theirs = stream.messages.front().call;
      if (stream.front_offset == 0 && theirs != call_) {
        lock.unlock();
        return disagree(from, theirs);
      }
      std::vector<char>& front = stream.messages.front().bytes;
      size_t take = std::min(bytes - got, front.size() - stream.front_offset);
      std::memcpy(out + got, front.data() + stream.front_offset, take);
      got += take;
      stream.front_offset += take;
      if (stream.front_offset == front.size()) {
        stream.messages.pop_front();
        stream.front_offset = 0;
      }
    }
    if (got == bytes) break;
    if (interrupted_.load()) {
      lock.unlock();
      return interrupted();
    }
    if (Status aborted = group_->abort_seen_by(rank_, call_.sequence); !aborted.ok()) return fail(aborted);
    if (group_->dead[rank_].load()) return fail(unavailable("rank " + std::to_string(rank_) + ": this transport is closed"));
    if (group_->dead[from].load())
      return fail(unavailable("rank " + std::to_string(from) + " closed its transport (inproc) with " +
                              std::to_string(bytes - got) + " of " + std::to_string(bytes) + " bytes unsent"));
    if (box.cv.wait_until(lock, deadline) == std::cv_status::timeout && Clock::now() >= deadline && stream.messages.empty())
      return fail(Status(Code::timeout, "rank " + std::to_string(from) + " sent " + std::to_string(got) + " of " +
                                            std::to_string(bytes) + " bytes before the deadline (inproc)"));
  }
  return {};
}

Status InprocTransport::disagree(int peer, const CallDescriptor& theirs) {
  Status st = invalid_argument("rank " + std::to_string(peer) + " called " + theirs.describe() + "; this rank (" +
                               std::to_string(rank_) + ") called " + call_.describe() +
                               ": every rank must issue the same collectives in the same order with the same counts, "
                               "dtypes and options (inproc)");
  (void)fail(st);
  // The Communicator leaves argument errors alone; the other ranks must still hear of this one.
  abort(Status(st.code(), call_.describe() + ": " + st.message()));
  return st;
}

Status InprocTransport::send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data,
                                  size_t recv_bytes, Clock::time_point deadline) {
  TROUPE_RETURN_IF_ERROR(send(to, send_data, send_bytes, deadline));  // never blocks
  return recv(from, recv_data, recv_bytes, deadline);
}

std::vector<std::unique_ptr<Transport>> make_inproc_group(int size) {
  auto group = std::make_shared<InprocGroup>(size);
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<InprocTransport>(group, r));
  return out;
}

}  // namespace troupe::collectives
