// Tensor: a typed, shaped, contiguous (row-major) block of memory on the host or a CUDA device.
// A tensor either owns its storage (shared among copies of the handle, freed with the last one)
// or is a view of memory someone else owns (a slice of another tensor, or a raw pointer).
// Tensors are handles: copying one shares the bytes; use clone() or copy_from() to copy data.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/status.h"

namespace troupe {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[128, 784]"

class Tensor {
 public:
  Tensor() = default;  // an empty tensor: no storage, shape [0]

  // Allocates an owning, uninitialised tensor. Fails (unavailable) when the device is absent or out
  // of memory; negative dimensions are invalid_argument.
  static Expected<Tensor> empty(DType dtype, Shape shape, Device device = Device::cpu());
  // Host-only convenience: cannot fail except by std::bad_alloc; dimensions must be >= 0.
  static Tensor host(DType dtype, Shape shape);
  static Tensor host_zeros(DType dtype, Shape shape);
  // A non-owning view of `data`; the caller keeps the memory alive for as long as the view is used.
  static Tensor view(void* data, DType dtype, Shape shape, Device device = Device::cpu());

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  Device device() const { return device_; }
  bool owns_storage() const { return static_cast<bool>(storage_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <class T> T* data_as() { return static_cast<T*>(data_); }
  template <class T> const T* data_as() const { return static_cast<const T*>(data_); }

  // Rows [begin, end) of the first dimension, sharing storage. Out-of-range is invalid_argument.
  Expected<Tensor> slice(int64_t begin, int64_t end) const;
  // The same bytes with another shape of equal element count.
  Expected<Tensor> reshape(Shape shape) const;
  // A new owning tensor on `device` holding a copy of this one's bytes.
  Expected<Tensor> to(Device device) const;
  Expected<Tensor> clone() const { return to(device_); }
  // Copies `src` (same dtype and element count, any device) into this tensor.
  Status copy_from(const Tensor& src);
  // Sets every byte to zero (host tensors only; device tensors return unavailable for now).
  Status zero();

  std::string to_string() const;  // "Tensor(f32, [128, 784], cpu, owning)"

 private:
  struct Storage;
  Tensor(DType dtype, Shape shape, Device device, std::shared_ptr<Storage> storage, void* data)
      : dtype_(dtype), shape_(std::move(shape)), device_(device), storage_(std::move(storage)), data_(data) {}

  DType dtype_ = DType::f32;
  Shape shape_{0};
  Device device_;
  std::shared_ptr<Storage> storage_;
  void* data_ = nullptr;
};

}  // namespace troupe
