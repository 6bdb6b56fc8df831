#include "collectives/inproc_transport.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

namespace troupe::collectives {

namespace {

// The bytes one rank sent to another and the receiver has not read yet.
struct Stream {
  std::deque<std::vector<char>> messages;
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

  void mark_dead(int rank) {
    dead[rank].store(true);
    for (auto& box : inboxes) {  // wake every waiter so it sees the death
      std::lock_guard<std::mutex> lock(box.mu);
      box.cv.notify_all();
    }
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
  if (group_->dead[to].load())
    return fail(unavailable("rank " + std::to_string(to) + " closed its transport (inproc)"));
  Inbox& box = group_->inboxes[to];
  const char* p = static_cast<const char*>(data);
  std::vector<char> message(p, p + bytes);
  {
    std::lock_guard<std::mutex> lock(box.mu);
    box.from[rank_].messages.push_back(std::move(message));
  }
  box.cv.notify_all();
  return {};
}

Status InprocTransport::recv(int from, void* data, size_t bytes, Clock::time_point deadline) {
  if (!failed_.ok()) return failed_;
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
      std::vector<char>& front = stream.messages.front();
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
