// Collectives a transport runs itself rather than through the point-to-point algorithms: the
// shared-memory transport reduces straight out of its peers' mapped buffers, NCCL runs on the GPU.
// The Communicator checks arguments, numbers the call and then hands it here when the transport
// has a native path and the caller asked for "auto" or for its name.
//
// Buffers are the caller's, in the caller's dtype; `avg` is the native path's to apply. Errors
// follow the Transport's rules: by the deadline, naming the rank at fault, prefixed with
// call.prefix ("allreduce #17 (shm)").
#pragma once

#include <string>

#include "collectives/communicator.h"
#include "collectives/transport.h"

namespace troupe::collectives {

struct NativeCall {
  const CallDescriptor& descriptor;
  Clock::time_point deadline;
  std::string prefix;
};

class NativeCollectives {
 public:
  virtual ~NativeCollectives() = default;
  // The algorithm name reported in errors and accepted in CollectiveOptions::algorithm ("shm").
  virtual std::string name() const = 0;
  // Whether this path runs `kind`; the Communicator runs the point-to-point algorithms over the
  // transport's send/recv for the kinds it does not (the hierarchical transport only all-reduces;
  // a shift, point to point by nature, always goes over send/recv).
  virtual bool handles(CollectiveKind kind) const { return kind != CollectiveKind::shift; }

  virtual Status allreduce(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                           ReduceOp op) = 0;
  virtual Status broadcast(const NativeCall& call, void* buf, size_t count, DType dtype, int root) = 0;
  virtual Status allgather(const NativeCall& call, const void* in, void* out, size_t count, DType dtype) = 0;
  virtual Status reduce_scatter(const NativeCall& call, const void* in, void* out, size_t count, DType dtype,
                                ReduceOp op) = 0;
  virtual Status barrier(const NativeCall& call) = 0;

  // A buffer of `bytes` inside memory the peers can read directly (shm: this rank's arena), or
  // nullptr when the transport has none or it is smaller. Collectives whose buffers lie there may
  // skip their copies (see Communicator::shared_buffer).
  virtual void* shared_buffer(size_t bytes) {
    (void)bytes;
    return nullptr;
  }
};

}  // namespace troupe::collectives
