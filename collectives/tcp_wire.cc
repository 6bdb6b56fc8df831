#include "collectives/tcp_wire.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cerrno>
#include <cstring>

namespace troupe::collectives::tcp {

FrameHeader data_header(const CallDescriptor& call, size_t payload) {
  FrameHeader h;
  h.type = FrameType::data;
  h.kind = static_cast<uint8_t>(call.kind);
  h.dtype = static_cast<uint8_t>(call.dtype);
  h.reduce = call.reduce;
  h.wire = static_cast<uint8_t>(call.wire);
  h.root = call.root;
  h.sequence = call.sequence;
  h.count = call.count;
  h.payload = payload;
  return h;
}

FrameHeader abort_header(const CallDescriptor& call, Code code, int origin, size_t text_bytes) {
  FrameHeader h = data_header(call, text_bytes);
  h.type = FrameType::abort;
  h.code = static_cast<uint8_t>(code);
  h.origin = origin;
  return h;
}

CallDescriptor descriptor_of(const FrameHeader& h) {
  CallDescriptor d;
  d.sequence = h.sequence;
  d.kind = static_cast<CollectiveKind>(h.kind);
  d.dtype = static_cast<DType>(h.dtype);
  d.reduce = h.reduce;
  d.wire = static_cast<DType>(h.wire);
  d.root = h.root;
  d.count = h.count;
  return d;
}

Status check_data_frame(const FrameHeader& h, int peer, int self, const CallDescriptor& mine,
                        size_t expected_bytes) {
  const std::string who = "rank " + std::to_string(peer);
  if (h.magic != kFrameMagic || (h.type != FrameType::data && h.type != FrameType::abort))
    return corrupt_data(who + " sent a frame with a bad header (magic " + std::to_string(h.magic) +
                        "): the connection is out of step or not a troupe peer (tcp)");
  const CallDescriptor theirs = descriptor_of(h);
  if (theirs != mine)
    return invalid_argument(who + " called " + theirs.describe() + "; this rank (" + std::to_string(self) + ") called " + mine.describe() +
                            ": every rank must issue the same collectives in the same order with the same counts, "
                            "dtypes and options (tcp)");
  if (h.payload != expected_bytes)
    return internal_error(who + " sent " + std::to_string(h.payload) + " bytes where this rank expected " +
                          std::to_string(expected_bytes) + " in " + mine.describe() +
                          ": the algorithms disagree, a troupe bug (tcp)");
  return {};
}

Status abort_status(const FrameHeader& h, int peer, const std::string& text) {
  Code code = static_cast<Code>(h.code);
  // A code from a newer build, or "ok", must not turn an abort into something callers ignore.
  if (code == Code::ok || code > Code::internal) code = Code::unavailable;
  const int origin = h.origin >= 0 ? h.origin : peer;
  return Status(code, "rank " + std::to_string(origin) + " aborted " + text +
                          (origin == peer ? "" : " (relayed by rank " + std::to_string(peer) + ")"));
}

std::string errno_text() { return std::strerror(errno); }

Expected<sockaddr_in> resolve(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
    return invalid_argument("cannot resolve host '" + host + "'");
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return addr;
}

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>((left + 999) / 1000);
}

}  // namespace troupe::collectives::tcp
