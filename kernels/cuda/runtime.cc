#include "kernels/cuda/runtime.h"

#include <chrono>
#include <thread>

#include "kernels/cuda/check.h"

namespace troupe::kernels::cuda {

Status allocate_device_bytes(void** ptr, size_t bytes, const char* what) {
  cudaError_t err = cudaMalloc(ptr, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    *ptr = nullptr;
    std::string msg = "allocating " + std::to_string(bytes) + " bytes for " + what + " on the GPU";
    return cuda_status(err, msg.c_str(), __FILE__, __LINE__);
  }
  return {};
}

Status allocate_pinned_bytes(void** ptr, size_t bytes, const char* what) {
  cudaError_t err = cudaMallocHost(ptr, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    *ptr = nullptr;
    std::string msg = "allocating " + std::to_string(bytes) + " bytes of pinned host memory for " + what;
    return cuda_status(err, msg.c_str(), __FILE__, __LINE__);
  }
  return {};
}

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
Status Stream::create() {
  TROUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  return {};
}

Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
Status Event::create() {
  TROUPE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  return {};
}

GraphExec::~GraphExec() {
  if (exec_) cudaGraphExecDestroy(exec_);
}

Status GraphExec::begin_capture(cudaStream_t stream) {
  if (stream == nullptr) return invalid_argument("GraphExec::capture: the legacy default stream cannot be captured; pass a Stream");
  // Relaxed: other threads may use the CUDA runtime while we capture (no unsafe calls are made here).
  TROUPE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  return {};
}

Status GraphExec::end_capture(cudaStream_t stream, Status enqueue_status) {
  cudaGraph_t graph = nullptr;
  cudaError_t end_err = cudaStreamEndCapture(stream, &graph);
  if (!enqueue_status.ok()) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    return enqueue_status.with_context("capturing a CUDA graph");
  }
  TROUPE_CUDA_CHECK(end_err);
  if (exec_) cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  TROUPE_CUDA_CHECK(err);
  return {};
}

Status GraphExec::launch(cudaStream_t stream) const {
  if (!exec_) return internal_error("GraphExec::launch: no graph was captured");
  TROUPE_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  return {};
}

Status wait_event(cudaEvent_t event, double timeout_seconds, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t err = cudaEventQuery(event);
    if (err == cudaSuccess) return {};
    if (err != cudaErrorNotReady) return cuda_status(err, ("waiting for " + what).c_str(), __FILE__, __LINE__);
    if (std::chrono::steady_clock::now() > deadline) {
      return {Code::timeout, "waiting for " + what + ": the GPU did not finish within " +
                                 std::to_string(timeout_seconds) +
                                 " s; check nvidia-smi for other processes using the GPU or a hung kernel"};
    }
    // Yield for the first milliseconds (a chunk of training steps ends within them and the next
    // launch should follow at once), then sleep so a long wait does not burn a core.
    if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(20)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

Status select_device(int index) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::string why = err != cudaSuccess ? cudaGetErrorString(err) : "0 devices";
    cudaGetLastError();
    return unavailable("no CUDA device is visible (" + why +
                       "); run on a machine with an NVIDIA GPU and driver, check CUDA_VISIBLE_DEVICES, "
                       "or use --device cpu");
  }
  if (index < 0 || index >= count) {
    return unavailable("CUDA device " + std::to_string(index) + " does not exist: this machine has " +
                       std::to_string(count) + "; pick cuda:0 .. cuda:" + std::to_string(count - 1));
  }
  TROUPE_CUDA_CHECK(cudaSetDevice(index));
  return {};
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
    cudaGetLastError();
    return "cuda device " + std::to_string(index);
  }
  return prop.name;
}

}  // namespace troupe::kernels::cuda
