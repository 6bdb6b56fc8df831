// The step loop shared by the ring reduce-scatter and the ring all-gather (collectives/algorithm.h).
//
// No memory is allocated per call. f32 values travel as they are: segments are sent straight from
// `data`, and the all-gather receives straight into it. What needs staging (a reduce-scatter
// segment before it is accumulated, f16/bf16 encodings) goes through two buffers of at most one
// segment each, kept per thread from call to call. Allocating them per call was the 1 MiB cliff of
// the TCP all-reduce: once two of them passed glibc's trim threshold, free() gave them back to the
// kernel and the next call page-faulted every page in again (costly in a VM, and a chance for the
// scheduler to preempt a rank while its ring neighbour waits).
#include <algorithm>

#include "collectives/algorithm.h"

namespace troupe::collectives {

namespace {

struct RingScratch {
  std::vector<char> send, recv;  // wire bytes of one segment each way; grow once, never shrink
};

// Bytes [0, bytes) of `buf`, grown (not value-initialised again) when it is short.
char* at_least(std::vector<char>& buf, size_t bytes) {
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

}  // namespace

Status ring_pass(const CallContext& ctx, float* data, const std::vector<size_t>& offsets, int shift,
                 const Wire& wire, const RingReceive& receive) {
  thread_local RingScratch scratch;  // bounded: two segments, 1 MiB of f32
  const int p = ctx.size(), r = ctx.rank();
  const int next = ring_mod(r + 1, p), prev = ring_mod(r - 1, p);
  const bool raw = wire.dtype == DType::f32;  // wire bytes are the values themselves
  for (int s = 0; s + 1 < p; ++s) {
    const int sb = ring_mod(r - s - shift, p), rb = ring_mod(r - s - shift - 1, p);
    const size_t send_len = offsets[sb + 1] - offsets[sb], recv_len = offsets[rb + 1] - offsets[rb];
    // Move the blocks in segments so staging memory stays bounded for large buffers.
    for (size_t at = 0; at < std::max(send_len, recv_len); at += kSegmentElements) {
      const size_t sn = at < send_len ? std::min(kSegmentElements, send_len - at) : 0;
      const size_t rn = at < recv_len ? std::min(kSegmentElements, recv_len - at) : 0;
      float* const src = data + offsets[sb] + at;
      float* const dst = data + offsets[rb] + at;
      // Blocks sb and rb are distinct, so sending from `data` while receiving into it is safe.
      const void* send = src;
      if (!raw) {
        char* encoded = at_least(scratch.send, wire.bytes(sn));
        wire.encode(src, sn, encoded);
        send = encoded;
      }
      void* recv = raw && !receive ? static_cast<void*>(dst) : at_least(scratch.recv, wire.bytes(rn));
      TROUPE_RETURN_IF_ERROR(ctx.wrap(
          ctx.transport.send_recv(next, send, wire.bytes(sn), prev, recv, wire.bytes(rn), ctx.deadline)));
      if (receive) receive(dst, static_cast<const char*>(recv), rn);
      else if (!raw) wire.decode(recv, rn, dst);
    }
  }
  return {};
}

}  // namespace troupe::collectives
