// Collectives over GPU buffers. Two paths behind one interface:
//  - NCCL (form_nccl_group): one rank per process per GPU; the NCCL unique id travels through the
//    GCS (table "group_nccl_ids", key "<name>/<generation>", written by rank 0). NCCL refuses two
//    ranks on one GPU.
//  - staged (make_staged_communicator): device -> pinned host -> any host Communicator (shared
//    memory, TCP, hierarchical) -> device, for ranks sharing one GPU or CUDA without NCCL.
// Both are synchronous like the host Communicator: a call returns once `out` holds the result, or
// with an error by its deadline. Work is ordered after what the caller queued on
// CollectiveOptions::stream (null: the legacy default stream). Built without CUDA (or NCCL), the
// factories return `unavailable` saying so.
#pragma once

#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "collectives/group_rendezvous.h"
#include "gcs/store.h"

namespace troupe::collectives {

constexpr const char* kGroupNcclIdsTable = "group_nccl_ids";

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int device() const = 0;
  // "nccl" or "staged(<host transport>)"
  virtual std::string path() const = 0;
  uint64_t sequence() const { return sequence_; }

  // The host Communicator's semantics, on device pointers of device().
  virtual Status allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                           const CollectiveOptions& options = {}) = 0;
  virtual Status broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& options = {}) = 0;
  virtual Status allgather(const void* in, void* out, size_t count, DType dtype,
                           const CollectiveOptions& options = {}) = 0;
  virtual Status reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                                const CollectiveOptions& options = {}) = 0;
  virtual Status barrier(const CollectiveOptions& options = {}) = 0;
  // The host Communicator a staged communicator reduces through (the job's group, for barriers off
  // the device such as checkpoints); null for NCCL, whose host group the caller keeps.
  virtual Communicator* host() { return nullptr; }

 protected:
  uint64_t sequence_ = 0;
};

// Device buffers on `device` reduced through `host` (which keeps its own sequence numbers).
Expected<std::unique_ptr<DeviceCommunicator>> make_staged_communicator(std::unique_ptr<Communicator> host, int device);

// Forms an NCCL group by name through the GCS: options.name/generation/rank/world_size/timeout as in
// form_group (host is unused). Errors: invalid_argument, timeout naming the ranks that did not
// join, unavailable when built without NCCL or no GPU is visible.
Expected<std::unique_ptr<DeviceCommunicator>> form_nccl_group(gcs::Store& store, const GroupOptions& options,
                                                              int device);

// Whether this build has the CUDA path / the NCCL path.
bool built_with_cuda_collectives();
bool built_with_nccl();

}  // namespace troupe::collectives
