// Where memory lives: the host, or one CUDA device. The allocation functions are the only place in
// core that touches the CUDA runtime; in a build without CUDA they return `unavailable` errors.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"

namespace troupe {

struct Device {
  enum class Kind : unsigned char { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  bool operator==(const Device& o) const { return kind == o.kind && (is_cpu() || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  // "cpu" or "cuda:0". Inline: the trainer API (trainers/api) installs this header without core's library.
  std::string to_string() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }
};

// Parses "cpu", "cuda" (device 0) or "cuda:N".
Expected<Device> parse_device(const std::string& text);

// True when this build has CUDA support compiled in.
bool cuda_compiled();
// Number of CUDA devices this process can see; 0 without CUDA or without a GPU. When there is none,
// `why` (if given) receives the reason, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected".
int cuda_device_count(std::string* why = nullptr);

// Allocates `bytes` on `device` (64-byte aligned on the host). Returns nullptr with `error` set on
// failure; host allocation failure throws std::bad_alloc like new.
void* device_alloc(Device device, size_t bytes, Status* error);
void device_free(Device device, void* ptr);
// Copies between any two devices (host-host, host-device, device-host, device-device); synchronous.
Status device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace troupe
