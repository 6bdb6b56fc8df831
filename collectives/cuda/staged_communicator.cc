// The staged device path: device buffers copied to pinned host memory, reduced by a host
// Communicator over whatever transport it has, copied back. Slower than NCCL by two PCIe copies,
// but works for ranks sharing one GPU (which NCCL refuses) and for CUDA without NCCL.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>

#include "collectives/device_communicator.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"

namespace troupe::collectives {
namespace {

namespace cu = troupe::kernels::cuda;

double seconds_left(Clock::time_point deadline) {
  return std::max(0.001, std::chrono::duration<double>(deadline - Clock::now()).count());
}

class StagedCommunicator final : public DeviceCommunicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, int device) : host_(std::move(host)), device_(device) {}

  Status init() {
    TROUPE_RETURN_IF_ERROR(cu::select_device(device_));
    TROUPE_RETURN_IF_ERROR(stream_.create());
    TROUPE_RETURN_IF_ERROR(ready_.create());
    return done_.create();
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int device() const override { return device_; }
  std::string path() const override { return "staged(" + host_->transport().kind() + ")"; }
  Communicator* host() override { return host_.get(); }

  Status allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                   const CollectiveOptions& options) override {
    const size_t bytes = count * dtype_size(dtype);
    return staged("allreduce", options, bytes, bytes, in, out, [&](char* h, const CollectiveOptions& o) {
      return host_->allreduce(h, h, count, dtype, op, o);
    });
  }
  Status broadcast(void* buf, size_t count, DType dtype, int root, const CollectiveOptions& options) override {
    const size_t bytes = count * dtype_size(dtype);
    return staged("broadcast", options, bytes, bytes, buf, buf,
                  [&](char* h, const CollectiveOptions& o) { return host_->broadcast(h, count, dtype, root, o); });
  }
  Status allgather(const void* in, void* out, size_t count, DType dtype, const CollectiveOptions& options) override {
    const size_t block = count * dtype_size(dtype);
    // Stage this rank's block at its place in the gathered buffer: the host all-gather is then in place.
    return staged("allgather", options, block, block * size(), in, out,
                  [&](char* h, const CollectiveOptions& o) { return host_->allgather(h + rank() * block, h, count, dtype, o); },
                  rank() * block);
  }
  Status reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                        const CollectiveOptions& options) override {
    const size_t block = count * dtype_size(dtype);
    return staged("reduce_scatter", options, block * size(), block, in, out, [&](char* h, const CollectiveOptions& o) {
      return host_->reduce_scatter(h, h, count, dtype, op, o);
    });
  }
  Status barrier(const CollectiveOptions& options) override {
    ++sequence_;
    return host_->barrier(options);
  }

 private:
  // Copies `in_bytes` of `in` to pinned memory (at `in_offset`), runs `host_call` on it, copies the
  // first `out_bytes` back to `out`. Waits are bounded by the call's deadline.
  template <class F>
  Status staged(const char* op, const CollectiveOptions& options, size_t in_bytes, size_t out_bytes, const void* in,
                void* out, F&& host_call, size_t in_offset = 0) {
    const uint64_t seq = ++sequence_;
    const auto deadline = Clock::now() + options.timeout;
    const std::string what = std::string(op) + " #" + std::to_string(seq) + " (" + path() + ")";
    TROUPE_RETURN_IF_ERROR(cu::select_device(device_));
    const size_t need = std::max(in_offset + in_bytes, out_bytes);
    if (need > capacity_) {
      TROUPE_RETURN_IF_ERROR(pinned_.allocate(need, "staging a device collective in pinned host memory"));
      capacity_ = need;
    }
    auto user_stream = static_cast<cudaStream_t>(options.stream);
    TROUPE_CUDA_CHECK(cudaEventRecord(ready_.get(), user_stream));
    TROUPE_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), ready_.get(), 0));
    if (in_bytes > 0)
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(pinned_.get() + in_offset, in, in_bytes, cudaMemcpyDeviceToHost, stream_.get()));
    TROUPE_CUDA_CHECK(cudaEventRecord(done_.get(), stream_.get()));
    TROUPE_RETURN_IF_ERROR(cu::wait_event(done_.get(), seconds_left(deadline), what + ": copying to the host"));
    CollectiveOptions left = options;
    left.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.timeout.count() < 1) left.timeout = std::chrono::milliseconds(1);
    Status st = host_call(pinned_.get(), left);
    if (!st.ok()) return Status(st.code(), what + ": " + st.message());
    if (out_bytes > 0)
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(out, pinned_.get(), out_bytes, cudaMemcpyHostToDevice, stream_.get()));
    TROUPE_CUDA_CHECK(cudaEventRecord(done_.get(), stream_.get()));
    return cu::wait_event(done_.get(), seconds_left(deadline), what + ": copying back to the device");
  }

  std::unique_ptr<Communicator> host_;
  int device_;
  cu::Stream stream_;
  cu::Event ready_, done_;
  cu::PinnedBuffer<char> pinned_;
  size_t capacity_ = 0;
};

}  // namespace

Expected<std::unique_ptr<DeviceCommunicator>> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                                       int device) {
  if (!host) return invalid_argument("staged device communicator: no host communicator");
  auto comm = std::make_unique<StagedCommunicator>(std::move(host), device);
  TROUPE_RETURN_IF_ERROR(comm->init());
  return std::unique_ptr<DeviceCommunicator>(std::move(comm));
}

bool built_with_cuda_collectives() { return true; }

}  // namespace troupe::collectives
