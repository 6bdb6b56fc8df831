#include "trainers/sharded/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace troupe {
namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

Expected<PageBuffer> PageBuffer::create(size_t floats) {
  PageBuffer b;
  const size_t page = page_size();
  b.mapped_ = std::max<size_t>(page, (floats * sizeof(float) + page - 1) / page * page);
  void* p = ::mmap(nullptr, b.mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return unavailable("mapping a gradient buffer of " + std::to_string(b.mapped_) +
                       " bytes: " + std::strerror(errno));
  }
  // Pages, not 2 MiB huge pages (where transparent huge pages are on for every mapping), so that
  // giving back a bucket's range gives back memory.
  ::madvise(p, b.mapped_, MADV_NOHUGEPAGE);
  b.data_ = static_cast<float*>(p);
  b.floats_ = floats;
  return b;
}

PageBuffer::~PageBuffer() {
  if (data_) ::munmap(data_, mapped_);
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      floats_(std::exchange(other.floats_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    floats_ = std::exchange(other.floats_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void PageBuffer::release(size_t begin, size_t end) {
  end = std::min(end, floats_);
  if (begin >= end) return;
  const size_t page = page_size();
  const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t from = base + begin * sizeof(float), to = base + end * sizeof(float);
  const uintptr_t first_page = (from + page - 1) / page * page, last_page = to / page * page;
  if (first_page >= last_page) {  // within one or two pages: no whole page to give back
    std::memset(data_ + begin, 0, (end - begin) * sizeof(float));
    return;
  }
  std::memset(reinterpret_cast<void*>(from), 0, first_page - from);
  std::memset(reinterpret_cast<void*>(last_page), 0, to - last_page);
  // Private anonymous pages read as zeros after MADV_DONTNEED.
  ::madvise(reinterpret_cast<void*>(first_page), last_page - first_page, MADV_DONTNEED);
}

void PageBuffer::prepare(size_t begin, size_t end) {
#ifdef MADV_POPULATE_WRITE
  end = std::min(end, floats_);
  if (begin >= end) return;
  const size_t page = page_size();
  const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t from = (base + begin * sizeof(float)) / page * page;
  const uintptr_t to = (base + end * sizeof(float) + page - 1) / page * page;
  ::madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE);
#else
  (void)begin;
  (void)end;
#endif
}

size_t PageBuffer::resident_bytes() const {
  if (!data_) return 0;
  const size_t page = page_size();
  std::vector<unsigned char> in(mapped_ / page);
  if (::mincore(data_, mapped_, in.data()) != 0) return mapped_;  // cannot tell: count it all
  size_t pages = 0;
  for (unsigned char c : in) pages += c & 1;
  return pages * page;
}

}  // namespace troupe
