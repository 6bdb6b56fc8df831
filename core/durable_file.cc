#include "core/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

namespace troupe {

namespace {
std::string errno_text() { return std::strerror(errno); }

Status write_all(int fd, const std::string& bytes, const std::string& what, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("writing " + what + " " + path + " failed: " + errno_text());
    done += static_cast<size_t>(n);
  }
  return {};
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

UniqueFd::~UniqueFd() {
  if (fd >= 0) ::close(fd);
}

Status fsync_directory(const std::string& dir) {
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd < 0) return io_error("cannot open directory " + dir + " to flush it: " + errno_text());
  if (::fsync(d.fd) != 0) return io_error("flushing directory " + dir + " failed: " + errno_text());
  return {};
}

std::string temporary_beside(const std::string& path) {
  // Beside the final file (same file system, so the rename is atomic).
  return path + ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
}

Status publish_durably(int fd, const std::string& tmp, const std::string& path, const std::string& what) {
  if (::fsync(fd) != 0) {
    const Status st = io_error("flushing " + what + " " + tmp + " failed: " + errno_text());
    ::unlink(tmp.c_str());
    return st;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    return io_error("renaming " + what + " " + tmp + " to " + path + " failed: " + why);
  }
  return fsync_directory(parent_of(path));
}

Status write_file_durably(const std::string& path, const std::string& bytes, const std::string& what, unsigned mode) {
  const std::string tmp = temporary_beside(path);
  UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(mode)));
  if (f.fd < 0) return io_error("cannot create " + what + " " + tmp + ": " + errno_text());
  const Status st = write_all(f.fd, bytes, what, tmp);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return publish_durably(f.fd, tmp, path, what);
}

Expected<std::string> read_whole_file(const std::string& path, const std::string& what, size_t limit) {
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) {
    if (errno == ENOENT) return not_found(what + " " + path + " does not exist");
    return io_error("cannot open " + what + " " + path + ": " + errno_text());
  }
  std::string bytes;
  struct stat st {};
  if (::fstat(f.fd, &st) == 0 && st.st_size > 0 && static_cast<uint64_t>(st.st_size) <= limit)
    bytes.reserve(static_cast<size_t>(st.st_size) + 1);  // one allocation: no regrowth copies of a large file
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("reading " + what + " " + path + " failed: " + errno_text());
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > limit)
      return corrupt_data(what + " " + path + " is over " + std::to_string(limit >> 20) + " MiB: not a " + what);
  }
  return bytes;
}

}  // namespace troupe
