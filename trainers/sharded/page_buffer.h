// A float buffer of whole pages from the kernel (an anonymous mapping), whose ranges can be given
// back while the buffer keeps its addresses: sharded data parallelism's gradient buffer
// (`--shard gradients`) has the trainer write every block's gradient in the usual flat layout, and
// returns a bucket's pages as soon as the bucket is reduced, so the full gradient is never resident
// beyond the buckets being reduced. resident_bytes() measures what is really held (mincore).
#pragma once

#include <cstddef>

#include "core/status.h"

namespace troupe {

class PageBuffer {
 public:
  // `floats` zeroed floats. unavailable naming the size when the kernel refuses the mapping.
  static Expected<PageBuffer> create(size_t floats);
  PageBuffer() = default;
  ~PageBuffer();
  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  float* data() const { return data_; }
  size_t size() const { return floats_; }

  // [begin, end) reads as zeros afterwards: the pages wholly inside it go back to the kernel (they
  // are zero pages again when next touched), the parts of the pages at its edges are zeroed in place
  // (those pages hold neighbours' values).
  void release(size_t begin, size_t end);

  // The pages [begin, end) touches backed by zeroed memory now, in one call (MADV_POPULATE_WRITE),
  // rather than one page fault at a time as they are first written: faults of threads sharing an
  // address space contend. Pages present already are left as they are. A no-op where the kernel
  // cannot (before Linux 5.14).
  void prepare(size_t begin, size_t end);

  // Bytes of the buffer backed by memory now (pages touched and not released).
  size_t resident_bytes() const;

 private:
  float* data_ = nullptr;
  size_t floats_ = 0;
  size_t mapped_ = 0;  // bytes, whole pages
};

}  // namespace troupe
