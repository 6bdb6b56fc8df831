#include "data/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/durable_file.h"

namespace troupe::data {
namespace {

std::string errno_text() { return std::strerror(errno); }

Status pwrite_all(int fd, const void* data, size_t size, uint64_t at, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("writing model file " + path + " failed: " + (n < 0 ? errno_text() : "no progress"));
    p += n;
    size -= static_cast<size_t>(n);
    at += static_cast<uint64_t>(n);
  }
  return {};
}

}  // namespace

Expected<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(
    const std::string& path, std::vector<TensorSpec> tensors, const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  auto header = safetensors_header(path, tensors, metadata, &w->offsets_, &w->data_bytes_);
  if (!header.ok()) return header.status();
  for (const TensorSpec& t : tensors) {
    w->widths_.push_back(safetensors_dtype_size(t.dtype));
    w->sizes_.push_back(static_cast<uint64_t>(shape_product(t.shape)) * w->widths_.back());
  }
  w->path_ = path;
  w->tmp_ = temporary_beside(path);
  w->fd_ = ::open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return io_error("cannot create model file " + w->tmp_ + ": " + errno_text());
  w->data_start_ = header->size();
  if (::ftruncate(w->fd_, static_cast<off_t>(w->data_start_ + w->data_bytes_)) != 0)
    return io_error("cannot size model file " + w->tmp_ + " to " + std::to_string(w->data_start_ + w->data_bytes_) +
                    " bytes: " + errno_text());
  TROUPE_RETURN_IF_ERROR(pwrite_all(w->fd_, header->data(), header->size(), 0, w->tmp_));
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Status SafetensorsWriter::write(size_t index, uint64_t at, const void* data, size_t size) {
  if (fd_ < 0) return internal_error("model file " + path_ + " written after commit or a failure");
  if (index >= sizes_.size() || at > sizes_[index] || size > sizes_[index] - at)
    return invalid_argument("model file " + path_ + ": bytes [" + std::to_string(at) + ", " +
                            std::to_string(at + size) + ") are not inside tensor #" + std::to_string(index));
  TROUPE_RETURN_IF_ERROR(pwrite_all(fd_, data, size, data_start_ + offsets_[index] + at, tmp_));
  written_ += size;
  return {};
}

Status SafetensorsWriter::commit() {
  if (fd_ < 0) return internal_error("model file " + path_ + " committed twice");
  if (written_ != data_bytes_)
    return internal_error("model file " + path_ + ": " + std::to_string(written_) + " of " +
                          std::to_string(data_bytes_) + " bytes of tensor data written");
  const Status st = publish_durably(fd_, tmp_, path_, "model file");  // removes the temporary if it fails
  ::close(fd_);
  fd_ = -1;
  tmp_.clear();
  return st;
}

}  // namespace troupe::data
