// RAII owners of CUDA runtime handles (device memory, streams, events, graphs) and a deadline-bound
// wait. Each owner is move-only; its destructor releases the handle and ignores errors (a destructor
// has nobody to report to; a failing release means the context is already broken and the next
// checked call reports it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "core/status.h"

namespace troupe::kernels::cuda {

// Memory for `count` elements of T on the current device; empty (null) until allocate() succeeds.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Frees what is held, then allocates `count` elements (uninitialised). `what` names the buffer in
  // the error ("allocating 188160000 bytes for train images on the GPU failed: ...").
  Status allocate(size_t count, const char* what);
  void reset() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

Status allocate_device_bytes(void** ptr, size_t bytes, const char* what);

template <class T>
Status DeviceBuffer<T>::allocate(size_t count, const char* what) {
  reset();
  void* p = nullptr;
  TROUPE_RETURN_IF_ERROR(allocate_device_bytes(&p, count * sizeof(T), what));
  ptr_ = static_cast<T*>(p);
  count_ = count;
  return {};
}

// Page-locked host memory (for asynchronous copies).
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  Status allocate(size_t count, const char* what);
  T* get() const { return ptr_; }
  T& operator[](size_t i) const { return ptr_[i]; }

 private:
  T* ptr_ = nullptr;
};

Status allocate_pinned_bytes(void** ptr, size_t bytes, const char* what);

template <class T>
Status PinnedBuffer<T>::allocate(size_t count, const char* what) {
  if (ptr_) cudaFreeHost(ptr_);
  ptr_ = nullptr;
  void* p = nullptr;
  TROUPE_RETURN_IF_ERROR(allocate_pinned_bytes(&p, count * sizeof(T), what));
  ptr_ = static_cast<T*>(p);
  return {};
}

// A non-blocking stream (does not synchronise with the legacy default stream).
class Stream {
 public:
  Stream() = default;
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Status create();
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing (cheapest to record and query).
class Event {
 public:
  Event() = default;
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Status create();
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// An instantiated CUDA graph, captured from the work a callable enqueues on a stream.
class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec();
  GraphExec(GraphExec&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& o) noexcept {
    std::swap(exec_, o.exec_);
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;

  // Captures everything `enqueue(stream)` puts on `stream` (which must be a non-default stream) and
  // instantiates it. On failure the capture is ended and the stream is usable again.
  template <class F>
  Status capture(cudaStream_t stream, F&& enqueue) {
    TROUPE_RETURN_IF_ERROR(begin_capture(stream));
    Status st = enqueue(stream);
    return end_capture(stream, std::move(st));
  }
  Status launch(cudaStream_t stream) const;
  bool ready() const { return exec_ != nullptr; }

 private:
  Status begin_capture(cudaStream_t stream);
  Status end_capture(cudaStream_t stream, Status enqueue_status);
  cudaGraphExec_t exec_ = nullptr;
};

// Waits until `event` completes, polling, for at most `timeout_seconds`. Returns `timeout` naming
// `what` when the deadline passes (a hung kernel or a GPU stalled by another process), or the
// error of the failed asynchronous work.
Status wait_event(cudaEvent_t event, double timeout_seconds, const std::string& what);

// Selects device `index` for this thread; `unavailable` with advice when there is none.
Status select_device(int index);
// "NVIDIA H100 80GB HBM3" (the CUDA device's name), or "cuda device N" when it cannot be read.
std::string device_name(int index);

}  // namespace troupe::kernels::cuda
