// The TCP transport over a formed mesh (tcp_mesh.cc): framed point-to-point messages, checked on
// receipt, and abort frames that spread a failure to every member.
//
// One exchange (send_recv) writes one data frame to `to` (header and payload in one sendmsg) and
// reads one from `from` (header and payload in one readv), both at once: it tries both sockets
// directly while they move bytes and waits in one poll() only when neither can. The other
// connections are watched while it waits: an abort frame at the head of any of them fails the
// call at once, so a rank far from a dead member hears of it without waiting for its neighbour.
// interrupt() (another thread) writes an eventfd that every poll() watches too.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "collectives/tcp_wire.h"

namespace troupe::collectives::tcp {

namespace {

constexpr size_t kHeader = sizeof(FrameHeader);
constexpr size_t kMaxAbortText = 64 * 1024;
// How long abort() may spend handing its frames to the sockets, all peers together.
constexpr auto kAbortBound = std::chrono::milliseconds(100);
// How long a rank that saw a peer close waits for an abort frame explaining why (the peer may be
// alive and have shut the connection because a data frame was half written when it gave up).
constexpr auto kCloseGrace = std::chrono::milliseconds(150);

bool would_block() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

// Bytes [done, done + n) of the two-part message {a (na bytes), b}: the iovecs still to move.
int remaining(void* a, size_t na, void* b, size_t nb, size_t done, iovec iov[2]) {
  int n = 0;
  if (done < na) iov[n++] = {static_cast<char*>(a) + done, na - done};
  const size_t in_b = done > na ? done - na : 0;
  if (in_b < nb) iov[n++] = {static_cast<char*>(b) + in_b, nb - in_b};
  return n;
}

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, std::vector<int> fds)
      : rank_(rank), peers_(fds.size()), wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    for (size_t p = 0; p < fds.size(); ++p) peers_[p].fd = fds[p];
  }
  ~TcpTransport() override {
    for (auto& p : peers_)
      if (p.fd >= 0) ::close(p.fd);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }
  std::string kind() const override { return "tcp"; }
  void begin_call(const CallDescriptor& call) override { call_ = call; }

  Status send(int to, const void* data, size_t bytes, Clock::time_point deadline) override {
    return send_recv(to, data, bytes, to, nullptr, 0, deadline);
  }
  Status recv(int from, void* data, size_t bytes, Clock::time_point deadline) override {
    return send_recv(from, nullptr, 0, from, data, bytes, deadline);
  }
  Status send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data, size_t recv_bytes,
                   Clock::time_point deadline) override {
    if (!failed_.ok()) return failed_;
    for (int peer : {to, from})
      if (peer < 0 || peer >= size() || peer == rank_)
        return invalid_argument("peer rank " + std::to_string(peer) + " is not another rank of a group of " +
                                std::to_string(size()));
    Status st = exchange(to, static_cast<const char*>(send_data), send_bytes, from, static_cast<char*>(recv_data),
                         recv_bytes, deadline);
    if (st.ok()) return st;
    failed_ = st;
    // The Communicator aborts on every other failure with the call's name; it leaves argument
    // errors alone (they usually never reach the wire), so a disagreement is announced here.
    if (st.code() == Code::invalid_argument) broadcast_abort(Status(st.code(), call_.describe() + ": " + st.message()));
    return st;
  }

  void abort(const Status& error) override {
    if (failed_.ok()) failed_ = error;
    broadcast_abort(error);
  }

  void interrupt(const Status& why) override {
    {
      std::lock_guard<std::mutex> lock(interrupt_mu_);
      if (interrupted_.load()) return;
      interrupt_why_ = why;
      interrupted_.store(true);
    }
    const uint64_t one = 1;
    if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
  }

 private:
  struct Peer {
    int fd = -1;
    bool partial = false;  // a data frame is half written: nothing else may follow it
    bool quiet = false;    // during one exchange: a data frame (not an abort) waits at its head
  };

  Status exchange(int to, const char* sp, size_t sn, int from, char* rp, size_t rn, Clock::time_point deadline);
  // Looks at the head of a watched connection: an abort frame is read and returned as the error;
  // anything else makes the peer quiet for the rest of the exchange.
  Status inspect(int peer);
  // Reads the rest of an abort frame whose header is `h` and whose first text bytes are `text`.
  Status read_abort(int peer, const FrameHeader& h, std::string text);
  // `closed` (a peer's connection closed or reset), unless an abort frame arrives on a connection
  // other than `skip`'s within kCloseGrace (and before `deadline`): the peer may be alive and have
  // shut the connection because it gave up with a data frame half written; the abort says why.
  Status explain_close(int skip, Status closed, Clock::time_point deadline);
  void broadcast_abort(const Status& error);

  int rank_;
  std::vector<Peer> peers_;
  CallDescriptor call_;
  Status failed_;
  bool abort_sent_ = false;
  int wake_fd_ = -1;  // eventfd written by interrupt(): wakes a poll() of the exchange
  std::atomic<bool> interrupted_{false};
  std::mutex interrupt_mu_;
  Status interrupt_why_;  // under interrupt_mu_
  Status interrupted() {
    std::lock_guard<std::mutex> lock(interrupt_mu_);
    return interrupt_why_;
  }
  struct {
    int origin = -1;  // set when this rank failed because of another's abort frame
    std::string text;
  } relay_;
};

Status TcpTransport::exchange(int to, const char* sp, size_t sn, int from, char* rp, size_t rn,
                              Clock::time_point deadline) {
  FrameHeader out = data_header(call_, sn), in;
  // Empty messages are not sent at all: both sides skip them alike.
  const size_t send_total = sn ? kHeader + sn : 0, recv_total = rn ? kHeader + rn : 0;
  size_t sent = 0, got = 0;
  for (auto& p : peers_) p.quiet = false;
  std::vector<pollfd> fds;
  std::vector<int> who;
  // Optimistic passes try the two sockets without asking poll() first, for as long as they move
  // bytes; only a pass that moved nothing waits in poll(), which also watches the other peers.
  bool optimistic = true;
  while (sent < send_total || got < recv_total) {
    if (interrupted_.load()) return interrupted();
    fds.clear();
    who.clear();
    for (int p = 0; p < size(); ++p) {
      if (peers_[p].fd < 0) continue;
      short events = 0;
      if (p == to && sent < send_total) events |= POLLOUT;
      if (p == from && got < recv_total) events |= POLLIN;
      else if (!peers_[p].quiet) events |= POLLIN;  // watched for abort frames
      if (events == 0) continue;
      fds.push_back({peers_[p].fd, events, 0});
      who.push_back(p);
    }
    if (!optimistic && wake_fd_ >= 0) {  // last, so `who` lines up with the peers' entries
      fds.push_back({wake_fd_, POLLIN, 0});
      who.push_back(-1);
    }
    const size_t moved_before = sent + got;
    int ready = 0;
    if (optimistic && Clock::now() < deadline) {
      for (size_t i = 0; i < fds.size(); ++i) {
        const bool reading = who[i] == from && got < recv_total;
        fds[i].revents = static_cast<short>((fds[i].events & POLLOUT) | (reading ? POLLIN : 0));
        ready += fds[i].revents != 0;
      }
    } else {
      ready = ::poll(fds.data(), fds.size(), ms_left(deadline));
    }
    if (ready < 0 && errno != EINTR) return io_error("poll: " + errno_text());
    if (ready == 0) {
      if (got < recv_total)
        return Status(Code::timeout, "rank " + std::to_string(from) + " sent " +
                                         std::to_string(got > kHeader ? got - kHeader : 0) + " of " +
                                         std::to_string(rn) + " bytes before the deadline (tcp)");
      return Status(Code::timeout, "rank " + std::to_string(to) + " accepted " +
                                       std::to_string(sent > kHeader ? sent - kHeader : 0) + " of " +
                                       std::to_string(sn) + " bytes before the deadline (tcp)");
    }
    if (ready < 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      const int p = who[i];
      const short rev = fds[i].revents;
      if (rev == 0) continue;
      if (p < 0) return interrupted();  // the wake fd: interrupt() was called
      if ((fds[i].events & POLLOUT) && (rev & (POLLOUT | POLLERR | POLLHUP))) {
        iovec iov[2];
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = remaining(&out, kHeader, const_cast<char*>(sp), sn, sent, iov);
        ssize_t k = ::sendmsg(peers_[p].fd, &msg, MSG_NOSIGNAL);
        if (k > 0) {
          sent += static_cast<size_t>(k);
          peers_[p].partial = sent < send_total;
        } else if (k < 0 && !would_block()) {
          Status st = unavailable("connection to rank " + std::to_string(to) + " closed: " + errno_text() + " (tcp)");
          // The abort frame of a peer that gave up may wait in this very connection, unless we
          // are inside a frame we are reading from it.
          const bool mid_frame = to == from && got > 0 && got < recv_total;
          return explain_close(mid_frame ? to : -1, st, deadline);
        }
      }
      if (!(rev & (POLLIN | POLLERR | POLLHUP))) continue;
      if (p != from || got >= recv_total) {
        TROUPE_RETURN_IF_ERROR(inspect(p));
        continue;
      }
      iovec iov[2];
      ssize_t k = ::readv(peers_[p].fd, iov, remaining(&in, kHeader, rp, rn, got, iov));
      if (k == 0)
        return explain_close(from,
                             unavailable("rank " + std::to_string(from) + " closed its connection with " +
                                         std::to_string(got >= kHeader ? recv_total - got : rn) + " of " +
                                         std::to_string(rn) + " bytes unsent (tcp)"),
                             deadline);
      if (k < 0) {
        if (would_block()) continue;
        return explain_close(
            from, unavailable("connection to rank " + std::to_string(from) + " failed: " + errno_text() + " (tcp)"),
            deadline);
      }
      const bool header_done_now = got < kHeader && got + static_cast<size_t>(k) >= kHeader;
      got += static_cast<size_t>(k);
      if (!header_done_now) continue;
      if (in.magic == kFrameMagic && in.type == FrameType::abort) {
        const size_t have = std::min<size_t>(got - kHeader, in.payload);
        return read_abort(from, in, std::string(rp, have));
      }
      TROUPE_RETURN_IF_ERROR(check_data_frame(in, from, rank_, call_, rn));
    }
    optimistic = sent + got != moved_before;
  }
  return {};
}

Status TcpTransport::inspect(int peer) {
  FrameHeader h;
  ssize_t k = ::recv(peers_[peer].fd, &h, kHeader, MSG_PEEK | MSG_DONTWAIT);
  if (k < 0 && would_block()) return {};
  // Closed, failing, a header still arriving, or data for a later step: not for us to read now.
  // An abort of a later call than ours waits its turn: its sender finished ours, so we still can.
  if (k != static_cast<ssize_t>(kHeader) || h.magic != kFrameMagic || h.type != FrameType::abort ||
      h.sequence > call_.sequence) {
    peers_[peer].quiet = true;
    return {};
  }
  (void)::recv(peers_[peer].fd, &h, kHeader, MSG_DONTWAIT);  // peeked whole: cannot come up short
  return read_abort(peer, h, "");
}

Status TcpTransport::read_abort(int peer, const FrameHeader& h, std::string text) {
  if (h.payload > kMaxAbortText)
    return corrupt_data("rank " + std::to_string(peer) + " sent an abort frame of " + std::to_string(h.payload) +
                        " bytes, more than " + std::to_string(kMaxAbortText) + " (tcp)");
  // The frame was written whole right after its header; its text is on the way or here.
  const auto until = Clock::now() + std::chrono::seconds(1);
  size_t have = text.size();
  text.resize(h.payload);
  while (have < text.size()) {
    pollfd pf{peers_[peer].fd, POLLIN, 0};
    if (::poll(&pf, 1, ms_left(until)) <= 0) break;
    ssize_t k = ::recv(peers_[peer].fd, &text[have], text.size() - have, 0);
    if (k <= 0 && !(k < 0 && would_block())) break;
    if (k > 0) have += static_cast<size_t>(k);
  }
  text.resize(have);
  relay_.origin = h.origin >= 0 ? h.origin : peer;
  relay_.text = text;
  return abort_status(h, peer, text);
}

Status TcpTransport::explain_close(int skip, Status closed, Clock::time_point deadline) {
  const auto until = std::min(deadline, Clock::now() + kCloseGrace);
  std::vector<pollfd> fds;
  std::vector<int> who;
  while (Clock::now() < until) {
    fds.clear();
    who.clear();
    for (int p = 0; p < size(); ++p)
      if (p != skip && peers_[p].fd >= 0 && !peers_[p].quiet) {
        fds.push_back({peers_[p].fd, POLLIN, 0});
        who.push_back(p);
      }
    if (fds.empty() || ::poll(fds.data(), fds.size(), ms_left(until)) <= 0) break;
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents) TROUPE_RETURN_IF_ERROR(inspect(who[i]));
  }
  return closed;
}

void TcpTransport::broadcast_abort(const Status& error) {
  if (abort_sent_) return;
  abort_sent_ = true;
  // An abort this rank received travels on as it came: its origin and text, not this rank's
  // account of it, so errors name the rank at the root however many hops they took.
  const bool relaying = relay_.origin >= 0;
  const std::string text = (relaying ? relay_.text : error.message()).substr(0, kMaxAbortText);
  FrameHeader h = abort_header(call_, error.code(), relaying ? relay_.origin : rank_, text.size());
  const size_t total = kHeader + text.size();
  std::vector<size_t> sent(peers_.size(), 0);
  std::vector<int> pending;
  for (int p = 0; p < size(); ++p) {
    if (peers_[p].fd < 0) continue;
    // Never interleave: a half-written data frame would swallow the abort frame's bytes.
    if (peers_[p].partial)
      ::shutdown(peers_[p].fd, SHUT_RDWR);
    else
      pending.push_back(p);
  }
  const auto until = Clock::now() + kAbortBound;
  while (!pending.empty()) {
    std::vector<int> left;
    for (int p : pending) {
      iovec iov[2];
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = remaining(&h, kHeader, const_cast<char*>(text.data()), text.size(), sent[p], iov);
      ssize_t k = ::sendmsg(peers_[p].fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) sent[p] += static_cast<size_t>(k);
      if (k < 0 && !would_block()) continue;  // dead peer: nothing to tell it
      if (sent[p] < total) left.push_back(p);
    }
    pending.swap(left);
    if (pending.empty() || Clock::now() >= until) break;
    std::vector<pollfd> fds;
    for (int p : pending) fds.push_back({peers_[p].fd, POLLOUT, 0});
    ::poll(fds.data(), fds.size(), ms_left(until));
  }
  // Whoever could not take the whole frame in time gets a closed connection instead of half of it.
  for (int p : pending) ::shutdown(peers_[p].fd, SHUT_RDWR);
}

}  // namespace

std::unique_ptr<Transport> make_transport(int rank, std::vector<int> fds) {
  return std::make_unique<TcpTransport>(rank, std::move(fds));
}

}  // namespace troupe::collectives::tcp
