// Internal to the TCP transport (tcp_transport.cc, tcp_mesh.cc): what travels on its sockets.
//
// After the handshake (tcp_mesh.cc) every message on a connection is a frame: a 40-byte header,
// then `payload` bytes. A data frame carries the CallDescriptor of the call that sent it, so the
// receiver can name a rank that called another collective, count, dtype or sequence number instead
// of reading its bytes as if they were what it expected. An abort frame carries a Status code, the
// rank that gave up and, as payload, the text of its error; receivers relay it once, unchanged, so
// every rank's error names the root cause rather than a chain of neighbours.
//
// Fields are in host byte order: every rank of a group runs on the same (little-endian) kind of
// host. A frame is always written whole or the socket is shut down, so a reader is always either
// inside a frame it has started or at the start of the next one.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/transport.h"

namespace troupe::collectives::tcp {

enum class FrameType : uint8_t { data = 1, abort = 2 };

constexpr uint16_t kFrameMagic = 0x7446;  // "Ft"

struct FrameHeader {
  uint16_t magic = kFrameMagic;
  FrameType type = FrameType::data;
  uint8_t kind = 0;    // CollectiveKind
  uint8_t dtype = 0;   // DType
  uint8_t reduce = 0;  // ReduceOp
  uint8_t wire = 0;    // DType
  uint8_t code = 0;    // abort frames: the troupe::Code of the error
  int32_t root = -1;
  int32_t origin = -1;  // abort frames: the rank that gave up first (a relay passes it on unchanged)
  uint64_t sequence = 0;
  uint64_t count = 0;
  uint64_t payload = 0;  // bytes that follow the header
};
static_assert(sizeof(FrameHeader) == 40, "the frame header is part of the wire protocol");

FrameHeader data_header(const CallDescriptor& call, size_t payload);
FrameHeader abort_header(const CallDescriptor& call, Code code, int origin, size_t text_bytes);
CallDescriptor descriptor_of(const FrameHeader& h);

// Checks a data frame from rank `peer` against this rank's (`self`) call and the bytes it expects:
// a different descriptor is invalid_argument naming the peer and both calls; a bad magic is
// corrupt_data; a payload of another size under an equal descriptor is internal (a troupe bug).
Status check_data_frame(const FrameHeader& h, int peer, int self, const CallDescriptor& mine,
                        size_t expected_bytes);

// The error a rank reports when rank `peer` sent an abort frame with `text`: "rank 3 aborted <text>",
// plus " (relayed by rank 1)" when `peer` passed on another rank's abort.
Status abort_status(const FrameHeader& h, int peer, const std::string& text);

// Socket helpers shared by the mesh, the transport and the parameter servers' wire (trainers/ps).
std::string errno_text();
int ms_left(Clock::time_point deadline);  // for poll(): rounded up, 0 when past
// An IPv4 address of `host` (dotted or a name) with `port`; invalid_argument when it does not resolve.
Expected<sockaddr_in> resolve(const std::string& host, int port);

// The transport over connected sockets: fds[peer], -1 for `rank` itself. Takes ownership.
std::unique_ptr<Transport> make_transport(int rank, std::vector<int> fds);

}  // namespace troupe::collectives::tcp
