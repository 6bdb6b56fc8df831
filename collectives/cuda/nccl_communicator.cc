// The NCCL device path. The communicator is created non-blocking so that creation and every
// collective can be abandoned at the deadline (ncclCommAbort) instead of hanging on a dead peer;
// NCCL does not say which rank stopped, so the timeout names the call and tells where to look.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "collectives/device_communicator.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"

namespace troupe::collectives {
namespace {

namespace cu = troupe::kernels::cuda;

std::string to_hex(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<const unsigned char*>(p)[i];
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

bool from_hex(const std::string& s, void* p, size_t n) {
  if (s.size() != 2 * n) return false;
  auto nibble = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  for (size_t i = 0; i < n; ++i) {
    int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

Status nccl_status(ncclResult_t r, const std::string& what) {
  if (r == ncclSuccess || r == ncclInProgress) return {};
  const Code code = r == ncclInvalidArgument || r == ncclInvalidUsage ? Code::invalid_argument : Code::unavailable;
  return Status(code, what + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(nullptr) + ")");
}

Expected<ncclDataType_t> nccl_type(DType d) {
  switch (d) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
  }
  return invalid_argument("no NCCL type for this dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : op == ReduceOp::avg ? ncclAvg : ncclMax; }

class NcclCommunicator final : public DeviceCommunicator {
 public:
  NcclCommunicator(int rank, int size, int device) : rank_(rank), size_(size), device_(device) {}
  ~NcclCommunicator() override {
    if (comm_) {
      // A healthy communicator is finalized; one whose calls failed is aborted (finalize could wait on dead peers).
      if (failed_.ok() && ncclCommFinalize(comm_) == ncclSuccess) (void)wait_ready(Clock::now() + std::chrono::seconds(5));
      ncclCommAbort(comm_);
    }
    if (scratch_) cudaFree(scratch_);
  }

  // Creates the communicator from `id`, bounded by `deadline`.
  Status init(const ncclUniqueId& id, Clock::time_point deadline, const std::string& label) {
    TROUPE_RETURN_IF_ERROR(cu::select_device(device_));
    TROUPE_RETURN_IF_ERROR(stream_.create());
    TROUPE_RETURN_IF_ERROR(ready_.create());
    TROUPE_RETURN_IF_ERROR(done_.create());
    TROUPE_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    TROUPE_RETURN_IF_ERROR(nccl_status(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config),
                                       label + ": ncclCommInitRankConfig"));
    Status st = wait_ready(deadline);
    if (st.ok()) return {};
    // NCCL reports "invalid usage" for two ranks on one GPU (in one process or two) on one rank and
    // only "job failed" on the others, so every rank gets the advice.
    const char* advice = st.code() == Code::invalid_argument
                             ? "; NCCL refuses two ranks on one GPU: give each rank its own device, or use the "
                               "staged path (make_staged_communicator) for ranks sharing a GPU"
                             : "; check that every rank started and sees its GPU";
    return fail(Status(st.code(), label + ": creating the NCCL communicator: " + st.message() + advice));
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device() const override { return device_; }
  std::string path() const override { return "nccl"; }

  Status allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                   const CollectiveOptions& options) override {
    auto type = nccl_type(dtype);
    if (!type) return type.status();
    return run("allreduce", options, dtype, [&](cudaStream_t s) {
      return ncclAllReduce(in, out, count, *type, nccl_op(op), comm_, s);
    });
  }
  Status broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& options) override {
    auto type = nccl_type(dtype);
    if (!type) return type.status();
    if (root < 0 || root >= size_) return invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank");
    return run("broadcast", options, dtype,
               [&](cudaStream_t s) { return ncclBroadcast(buf, buf, count, *type, root, comm_, s); });
  }
  Status allgather(const void* in, void* out, size_t count, DType dtype, const CollectiveOptions& options) override {
    auto type = nccl_type(dtype);
    if (!type) return type.status();
    return run("allgather", options, dtype,
               [&](cudaStream_t s) { return ncclAllGather(in, out, count, *type, comm_, s); });
  }
  Status reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                        const CollectiveOptions& options) override {
    auto type = nccl_type(dtype);
    if (!type) return type.status();
    return run("reduce_scatter", options, dtype, [&](cudaStream_t s) {
      return ncclReduceScatter(in, out, count, *type, nccl_op(op), comm_, s);
    });
  }
  Status barrier(const CollectiveOptions& options) override {
    // An all-reduce of one float: returns on a rank only once every rank has entered it.
    return run("barrier", options, DType::f32, [&](cudaStream_t s) {
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, s);
    });
  }

 private:
  template <class Enqueue>
  Status run(const char* op, const CollectiveOptions& options, DType dtype, Enqueue&& enqueue) {
    const uint64_t seq = ++sequence_;
    const std::string what = std::string(op) + " #" + std::to_string(seq) + " (nccl)";
    if (!failed_.ok()) return failed_;
    if (dtype == DType::f32 && options.wire != DType::f32)
      return invalid_argument(what + ": NCCL reduces in the buffer's dtype; f16/bf16 wire compression with f32 "
                                     "accumulation needs the staged path (make_staged_communicator)");
    const auto deadline = Clock::now() + options.timeout;
    TROUPE_RETURN_IF_ERROR(cu::select_device(device_));
    TROUPE_CUDA_CHECK(cudaEventRecord(ready_.get(), static_cast<cudaStream_t>(options.stream)));
    TROUPE_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), ready_.get(), 0));
    Status st = nccl_status(enqueue(stream_.get()), what);
    if (st.ok()) st = wait_ready(deadline);
    if (st.ok()) TROUPE_CUDA_CHECK(cudaEventRecord(done_.get(), stream_.get()));
    while (st.ok()) {  // poll both the stream and NCCL's own error state until done or the deadline
      cudaError_t q = cudaEventQuery(done_.get());
      if (q == cudaSuccess) return {};
      if (q != cudaErrorNotReady) {
        st = cu::cuda_status(q, "cudaEventQuery", __FILE__, __LINE__);
        break;
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        st = nccl_status(async, "peer or network failure");
        break;
      }
      if (Clock::now() >= deadline) {
        st = Status(Code::timeout, "did not complete before the deadline; NCCL does not say which rank stopped: "
                                   "see the group_failed events and the failure detector (troupe status)");
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return fail(Status(st.code(), what + ": " + st.message()));
  }

  // Waits while the (non-blocking) communicator is still working on its last request.
  Status wait_ready(Clock::time_point deadline) {
    for (;;) {
      ncclResult_t state = ncclInProgress;
      ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) return nccl_status(r, "ncclCommGetAsyncError");
      if (state != ncclInProgress) return nccl_status(state, "NCCL");
      if (Clock::now() >= deadline) return Status(Code::timeout, "NCCL did not finish before the deadline");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // The first failure aborts the communicator (so no rank blocks on it again) and sticks.
  Status fail(Status st) {
    if (failed_.ok()) failed_ = st;
    if (comm_) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    return st;
  }

  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
  cu::Stream stream_;
  cu::Event ready_, done_;
  void* scratch_ = nullptr;
  Status failed_;
};

std::string group_label(const GroupOptions& o) {
  return "nccl group '" + o.name + "' generation " + std::to_string(o.generation);
}

// Rank 0 publishes a fresh unique id; the others wait for it until the deadline.
Expected<ncclUniqueId> exchange_id(gcs::Store& store, const GroupOptions& o, Clock::time_point deadline) {
  const std::string key = o.name + "/" + std::to_string(o.generation);
  ncclUniqueId id;
  if (o.rank == 0) {
    TROUPE_RETURN_IF_ERROR(nccl_status(ncclGetUniqueId(&id), group_label(o) + ": ncclGetUniqueId"));
    auto stored = store.put_if_absent(kGroupNcclIdsTable, key, to_hex(&id, sizeof id));
    if (!stored) return stored.status().with_context(group_label(o));
    if (!*stored)
      return invalid_argument(group_label(o) + ": an NCCL id is already published (" + kGroupNcclIdsTable + "/" + key +
                              "); re-form the group at a new generation");
    return id;
  }
  for (;;) {
    auto value = store.get(kGroupNcclIdsTable, key);
    if (!value) return value.status().with_context(group_label(o));
    if (value->has_value()) {
      if (!from_hex(**value, &id, sizeof id))
        return corrupt_data(group_label(o) + ": " + kGroupNcclIdsTable + "/" + key + " is not a hex NCCL id");
      return id;
    }
    if (Clock::now() >= deadline)
      return Status(Code::timeout, group_label(o) + ": rank 0 did not publish the NCCL unique id in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

Expected<std::unique_ptr<DeviceCommunicator>> form_nccl_group(gcs::Store& store, const GroupOptions& o, int device) {
  if (o.name.empty() || o.name.find('/') != std::string::npos)
    return invalid_argument("group name '" + o.name + "' must be non-empty and contain no '/'");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return invalid_argument(group_label(o) + ": rank " + std::to_string(o.rank) + " is outside [0, " +
                            std::to_string(o.world_size) + ")");
  const auto deadline = Clock::now() + o.timeout;
  auto id = exchange_id(store, o, deadline);
  if (!id) return id.status();
  auto comm = std::make_unique<NcclCommunicator>(o.rank, o.world_size, device);
  TROUPE_RETURN_IF_ERROR(comm->init(*id, deadline, group_label(o)));
  return std::unique_ptr<DeviceCommunicator>(std::move(comm));
}

bool built_with_nccl() { return true; }

}  // namespace troupe::collectives
