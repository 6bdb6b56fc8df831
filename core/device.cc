#include "core/device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#ifdef TROUPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace troupe {

Expected<Device> parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda" || text == "gpu") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    char* end = nullptr;
    long idx = std::strtol(text.c_str() + 5, &end, 10);
    if (*end == '\0' && idx >= 0 && idx < 1024) return Device::cuda(static_cast<int>(idx));
  }
  return invalid_argument("device '" + text + "' is not one of cpu, cuda, cuda:N");
}

bool cuda_compiled() {
#ifdef TROUPE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count(std::string* why) {
#ifdef TROUPE_WITH_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount: 0 devices";
  return n;
#else
  if (why) *why = "troupe was built without CUDA (nvcc was not found at configure time)";
  return 0;
#endif
}

void* device_alloc(Device device, size_t bytes, Status* error) {
  if (device.is_cpu()) {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) throw std::bad_alloc();
    return p;
  }
#ifdef TROUPE_WITH_CUDA
  void* p = nullptr;
  cudaError_t err = cudaSetDevice(device.index);
  if (err == cudaSuccess) err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (error) {
      *error = unavailable("allocating " + std::to_string(bytes) + " bytes on " + device.to_string() +
                           " failed: " + cudaGetErrorString(err));
    }
    return nullptr;
  }
  return p;
#else
  if (error) *error = unavailable("cannot allocate on " + device.to_string() + ": troupe was built without CUDA");
  return nullptr;
#endif
}

void device_free(Device device, void* ptr) {
  if (!ptr) return;
  if (device.is_cpu()) {
    std::free(ptr);
    return;
  }
#ifdef TROUPE_WITH_CUDA
  cudaFree(ptr);
#endif
}

Status device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return {};
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return {};
  }
#ifdef TROUPE_WITH_CUDA
  cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return unavailable("copying " + std::to_string(bytes) + " bytes from " + src_device.to_string() + " to " +
                       dst_device.to_string() + " failed: " + cudaGetErrorString(err));
  }
  return {};
#else
  return unavailable("cannot copy between " + src_device.to_string() + " and " + dst_device.to_string() +
                     ": troupe was built without CUDA");
#endif
}

}  // namespace troupe
