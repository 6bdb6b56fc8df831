// Files written so that a crash leaves either the old file or the whole new one (checkpoint shards,
// checkpoint manifests on disk): a temporary file beside the final one, written whole, fsync'd,
// renamed over it, and the directory fsync'd. And the small pieces around them: a descriptor closed
// on every path out, a whole-file read with a size limit. Errors are io_error / not_found naming
// `what` ("checkpoint shard") and the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace troupe {

// A file descriptor closed on scope exit.
struct UniqueFd {
  int fd = -1;
  explicit UniqueFd(int f) : fd(f) {}
  ~UniqueFd();
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
};

// The temporary name beside `path` a durable write builds its file under: the process and thread
// in it, so writers in one directory never collide.
std::string temporary_beside(const std::string& path);

// A temporary file written whole (`fd`, open, at `tmp`) made `path` durably: flushed, renamed over
// it, the directory flushed. The temporary is removed when the flush or rename fails; `fd` is left
// open for its owner to close.
Status publish_durably(int fd, const std::string& tmp, const std::string& path, const std::string& what);

// `bytes` into `path`, durably (above), with permissions `mode` (0755 for a shared library). The
// temporary name carries the process and thread, so writers in one directory never collide.
Status write_file_durably(const std::string& path, const std::string& bytes, const std::string& what,
                          unsigned mode = 0644);

// The whole file: not_found "<what> <path> does not exist", io_error, or corrupt_data when it is
// longer than `limit` bytes.
Expected<std::string> read_whole_file(const std::string& path, const std::string& what, size_t limit = SIZE_MAX);

// fsync of a directory (after a rename into it).
Status fsync_directory(const std::string& dir);

}  // namespace troupe
