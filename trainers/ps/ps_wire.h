// The parameter-server wire protocol and the socket helpers under it (ps_server.cc, ps_client.cc).
//
// A client holds one TCP connection per shard. Every message is a frame: a 40-byte Header, then
// `payload` bytes, written whole with one sendmsg loop. Fields are in host byte order (every
// process of a job runs on the same, little-endian, kind of host).
//
//   client -> server                          server -> client
//   hello   worker=rank, clock, version=      welcome  clock, version, spans, payload=ShardInfo
//           attempt, payload=job                       + spans DataSpans (or error, then close)
//   pull    worker, clock                     params   version, payload=range floats
//   pull_final                                params   (once every worker finished)
//   push    worker, clock, version pulled,    pushed   version after the push
//           spans, payload=range floats + spans DataSpans (the batch's tag)
//   replay  as push: a push of an older       pushed   version after it
//           clock this (restored) shard lost
//   finish  worker                            finished
//   history worker, clock                     history_reply clock, version = 1 when complete,
//                                                      spans = entries, payload = HistoryEntry
//                                                      x entries + their DataSpans in order
//   stats                                     stats_reply payload=StatsPayload + int64 buckets
//   (any request that fails)                  error    code=troupe::Code, payload=message text
//
// A hello's clock is the worker's own (0 when new; its clock when it reconnects to a restored
// shard); the welcome's is where the shard has the worker go on, its version the shard's, its spans
// the tag of the rank's last applied push (a replacement resumes its predecessor's data there:
// trainers/ps/applied_data.h), and its ShardInfo that push's clock (a worker reconnecting to a
// restored shard replays the pushes after it: ps_client.h).
// A history request asks for the rank's applied pushes after `clock` (push_history.h): a
// replacement worker's predecessor died with another shard, which comes back restored without them.
// Version 2 ("tps2") added the spans, version 3 ("tps3") replays and ShardInfo::last_push, version
// 4 ("tps4") history; a peer of another version fails on the magic, by name.
// An error reply keeps the connection in step and open. A frame that cannot be understood (bad
// magic, unknown op, a payload of the wrong size) closes the connection, logged on the server and
// reported by the client naming the shard. Every read and write has a deadline (poll).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/feed/batch_feed.h"
#include "trainers/ps/push_history.h"

namespace troupe::ps::wire {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x34737074;     // "tps4": bumped with every change of the protocol
constexpr uint64_t kMaxJobId = 1024;       // bytes of a hello's job id
constexpr uint64_t kMaxErrorText = 65536;  // bytes of an error's text
constexpr int32_t kMaxSpans = 4096;        // DataSpans of one push or welcome
constexpr int32_t kMaxHistory = 65536;     // pushes of one history reply

enum class Op : uint8_t {
  hello = 1, welcome, pull, pull_final, params, push, pushed, finish, finished, stats, stats_reply, error, replay,
  history, history_reply,
};
const char* op_name(Op op);

struct Header {
  uint32_t magic = kMagic;
  Op op = Op::error;
  uint8_t code = 0;       // error: the troupe::Code
  uint16_t reserved = 0;
  int32_t worker = -1;
  int32_t spans = 0;      // push, welcome: DataSpans at the end of the payload
  int64_t clock = 0;
  int64_t version = 0;
  uint64_t payload = 0;   // bytes that follow
};
static_assert(sizeof(Header) == 40, "the header is part of the wire protocol");

// What a welcome tells a client about the shard it reached, so it can check the partition.
struct ShardInfo {
  uint64_t begin = 0, end = 0;  // the shard's floats of the flat buffer
  uint64_t total = 0;           // the job's parameters
  int32_t index = 0, shards = 0;
  int32_t workers = 0, mode = 0;
  int64_t last_push = -1;       // the clock of the connecting rank's last applied push (-1: none)
};

// One push of a history reply; its `spans` DataSpans follow all the entries, in entry order.
struct HistoryEntry {
  int64_t clock = 0;
  int32_t spans = 0;
  int32_t reserved = 0;
};
static_assert(sizeof(HistoryEntry) == 16, "part of the wire protocol");

struct StatsPayload {
  int64_t max = 0;
  double sum = 0;
  uint64_t buckets = 0;  // int64 counts that follow
};

// A frame's payload as write_frame takes it: `data`, then `tail_bytes` of `tail`.
struct Frame {
  const void* data = nullptr;
  const void* tail = nullptr;
  uint64_t tail_bytes = 0;
};

// An owned socket descriptor (closed on destruction).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { reset(); }
  int fd() const { return fd_; }
  void reset();
  // Gives up ownership: the descriptor, -1 here after.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// A nonblocking listener on host:port (0: any free port); *port receives the bound one.
Expected<Socket> listen_on(const std::string& host, int port, int* bound_port);
// Connects to "host:port", retrying a refusal until `deadline` (the server may be starting).
Expected<Socket> dial(const std::string& address, Clock::time_point deadline);
// Makes a socket nonblocking with TCP_NODELAY and keepalive probes: a peer silent for
// kKeepaliveIdleS seconds is probed every kKeepaliveIntervalS, and after kKeepaliveCount unanswered
// probes the connection fails (unavailable: "the peer stopped answering"); data left unacknowledged
// as long (TCP_USER_TIMEOUT) fails it too.
constexpr int kKeepaliveIdleS = 2;
constexpr int kKeepaliveIntervalS = 1;
constexpr int kKeepaliveCount = 3;
void tune(int fd);

// Writes the header and h.payload bytes: h.payload - tail_bytes from `payload`, then tail_bytes
// from `tail` (a push's floats and its tag, without copying them together), by the deadline. Errors: unavailable (peer closed or
// reset), timeout, io_error; the message says what failed, never where (callers add it).
Status write_frame(int fd, const Header& h, const void* payload, Clock::time_point deadline,
                   const void* tail = nullptr, uint64_t tail_bytes = 0);
// Reads exactly n bytes by the deadline; *got (if given) receives the bytes read before a failure.
Status read_exact(int fd, void* p, size_t n, Clock::time_point deadline, size_t* got = nullptr);
// Reads a header and checks its magic (corrupt_data for a bad one). *got as for read_exact.
Status read_header(int fd, Header* h, Clock::time_point deadline, size_t* got = nullptr);

// Reads n DataSpans (n checked against kMaxSpans by the caller) into *tag.
Status read_spans(int fd, int32_t n, DataTag* tag, Clock::time_point deadline);

// A history reply's payload: the entries of `pushes`, then their spans.
std::vector<char> encode_history(const std::vector<TaggedPush>& pushes);
// Reads the payload of history reply `h` into *pushes: corrupt_data when its sizes disagree.
Status read_history(int fd, const Header& h, std::vector<TaggedPush>* pushes, Clock::time_point deadline);

// An error frame's header for `st`, its text the payload.
Header error_header(const Status& st);
// The Status an error frame carried.
Status error_status(const Header& h, const std::string& text);

}  // namespace troupe::ps::wire
