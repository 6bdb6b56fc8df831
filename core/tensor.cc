#include "core/tensor.h"

#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace troupe {

struct Tensor::Storage {
  Storage(Device d, void* p) : device(d), ptr(p) {}
  ~Storage() { device_free(device, ptr); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  Device device;
  void* ptr;
};

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

// Dimensions must be >= 0 and their product's byte count must fit in int64 (so that numel() and
// nbytes() cannot overflow and under-allocate).
static Status check_shape(const Shape& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument("tensor shape " + shape_string(shape) + " has a negative dimension");
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  if (overflow || n > INT64_MAX / 8) {
    return invalid_argument("tensor shape " + shape_string(shape) + " has more elements than any memory can hold");
  }
  return {};
}

Expected<Tensor> Tensor::empty(DType dtype, Shape shape, Device device) {
  TROUPE_RETURN_IF_ERROR(check_shape(shape));
  size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  Status err;
  void* p = device_alloc(device, bytes, &err);
  if (!p) return err;
  auto storage = std::make_shared<Storage>(device, p);
  return Tensor(dtype, std::move(shape), device, std::move(storage), p);
}

Tensor Tensor::host(DType dtype, Shape shape) {
  Status st = check_shape(shape);
  if (!st.ok()) throw std::invalid_argument(st.message());
  return std::move(empty(dtype, std::move(shape), Device::cpu()).value());
}

Tensor Tensor::host_zeros(DType dtype, Shape shape) {
  Tensor t = host(dtype, std::move(shape));
  std::memset(t.data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::view(void* data, DType dtype, Shape shape, Device device) {
  return Tensor(dtype, std::move(shape), device, nullptr, data);
}

Expected<Tensor> Tensor::slice(int64_t begin, int64_t end) const {
  if (shape_.empty()) return invalid_argument("cannot slice a scalar tensor");
  if (begin < 0 || end < begin || end > shape_[0]) {
    return invalid_argument("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") is outside the first dimension of " + shape_string(shape_));
  }
  Shape s = shape_;
  s[0] = end - begin;
  int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  char* base = static_cast<char*>(data_) + static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return Tensor(dtype_, std::move(s), device_, storage_, base);
}

Expected<Tensor> Tensor::reshape(Shape shape) const {
  TROUPE_RETURN_IF_ERROR(check_shape(shape));
  if (shape_numel(shape) != numel()) {
    return invalid_argument("cannot reshape " + shape_string(shape_) + " to " + shape_string(shape) +
                            ": element counts differ");
  }
  return Tensor(dtype_, std::move(shape), device_, storage_, data_);
}

Expected<Tensor> Tensor::to(Device device) const {
  auto out = empty(dtype_, shape_, device);
  if (!out.ok()) return out.status();
  TROUPE_RETURN_IF_ERROR(out->copy_from(*this));
  return out;
}

Status Tensor::copy_from(const Tensor& src) {
  if (src.dtype_ != dtype_ || src.numel() != numel()) {
    return invalid_argument("copy_from: source " + src.to_string() + " does not match destination " + to_string());
  }
  return device_copy(data_, device_, src.data_, src.device_, nbytes());
}

Status Tensor::zero() {
  if (!device_.is_cpu()) return unavailable("Tensor::zero on " + device_.to_string() + " is not supported; use kernels");
  if (nbytes()) std::memset(data_, 0, nbytes());
  return {};
}

std::string Tensor::to_string() const {
  return std::string("Tensor(") + dtype_name(dtype_) + ", " + shape_string(shape_) + ", " + device_.to_string() +
         (storage_ ? ", owning)" : ", view)");
}

}  // namespace troupe
