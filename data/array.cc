#include "data/array.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>

namespace troupe::data {

int64_t shape_product(const std::vector<int64_t>& shape) {
  constexpr int64_t kMax = int64_t{1} << 56;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > kMax / d) return -1;
    n *= d;
  }
  return n;
}

Status read_claimed(const std::function<Expected<size_t>(uint8_t*, size_t)>& read, uint64_t claimed,
                    std::vector<uint8_t>* out, const std::string& where) {
  constexpr size_t kStep = size_t{8} << 20;
  out->clear();
  while (out->size() < claimed) {
    const size_t at = out->size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kStep, claimed - at));
    out->resize(at + want);
    auto got = read(out->data() + at, want);
    if (!got.ok()) return got.status();
    out->resize(at + *got);
    if (*got == 0) break;
  }
  if (out->size() < claimed)
    return corrupt_data(where + ": truncated: " + std::to_string(out->size()) + " of the " + std::to_string(claimed) +
                        " bytes its header claims");
  return {};
}

int64_t Array::elements() const { return shape_product(shape); }

std::vector<int64_t> Array::example_shape() const {
  if (shape.empty()) return {};
  return std::vector<int64_t>(shape.begin() + 1, shape.end());
}

int64_t Array::example_elements() const { return shape_product(example_shape()); }

std::string describe(ElemType type, const std::vector<int64_t>& shape) {
  std::string s = std::string(elem_name(type)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

Array owned_array(ElemType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  auto buf = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  Array a;
  a.type = type;
  a.shape = std::move(shape);
  a.bytes = buf->data();
  a.keep = std::move(buf);
  return a;
}

namespace {
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, size);
  }
};
}  // namespace

Expected<MappedFile> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return not_found(path + ": no such file");
    return io_error(path + ": cannot open: " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(path + ": not a regular file");
  }
  MappedFile f;
  f.size = static_cast<size_t>(st.st_size);
  if (f.size == 0) {
    ::close(fd);
    f.keep = std::make_shared<int>(0);
    return f;
  }
  void* addr = ::mmap(nullptr, f.size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);
  if (addr == MAP_FAILED) return io_error(path + ": cannot map " + std::to_string(f.size) + " bytes: " + std::strerror(e));
  auto m = std::make_shared<Mapping>();
  m->addr = addr;
  m->size = f.size;
  f.data = static_cast<const uint8_t*>(addr);
  f.keep = std::move(m);
  return f;
}

}  // namespace troupe::data
