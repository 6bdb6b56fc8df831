#include "trainers/job/predict_assembly.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "core/durable_file.h"
#include "data/npy_writer.h"

namespace troupe::job {
namespace {

Status write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return io_error("writing " + path + ": " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return {};
}

}  // namespace

std::string part_path(const std::string& parts_dir, int shard) {
  return parts_dir + "/part-" + std::to_string(shard) + ".npy";
}

std::string outputs_checksum(const float* values, int64_t n) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH64(values, static_cast<size_t>(n) * sizeof(float), 0)));
  return hex;
}

Status assemble_parts(const std::string& parts_dir, const std::vector<gcs::PredictedPart>& parts, int64_t rows,
                      int64_t width, const std::string& out) {
  const std::filesystem::path target(out);
  const std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  std::ostringstream tid;
  tid << std::this_thread::get_id();
  const std::string temp = out + ".tmp-" + std::to_string(::getpid()) + "-" + tid.str();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error("creating the predictions " + temp + ": " + std::strerror(errno) +
                    " (the --out directory must be writable where predictor 0 runs)");
  Status st;
  {
    UniqueFd closer(fd);
    const std::string header = data::npy_header({rows, width});
    st = write_all(fd, header.data(), header.size(), temp);
    int64_t next = 0;
    for (size_t i = 0; st.ok() && i < parts.size(); ++i) {
      const gcs::PredictedPart& p = parts[i];
      const std::string path = part_path(parts_dir, p.shard);
      if (p.first_row != next || p.width != width) {
        st = corrupt_data("part of shard " + std::to_string(p.shard) + " starts at row " + std::to_string(p.first_row) +
                          " with " + std::to_string(p.width) + " outputs; row " + std::to_string(next) + " with " +
                          std::to_string(width) + " was expected");
        break;
      }
      auto bytes = read_whole_file(path, "predicted part");
      if (!bytes.ok()) {
        st = bytes.status();
        break;
      }
      const std::string want = data::npy_header({p.rows, width});
      const size_t data_bytes = static_cast<size_t>(p.rows * width) * sizeof(float);
      if (bytes->size() != want.size() + data_bytes || bytes->compare(0, want.size(), want) != 0) {
        st = corrupt_data("predicted part " + path + " is not an f32 .npy of [" + std::to_string(p.rows) + ", " +
                          std::to_string(width) + "]: remove it and run the prediction again");
        break;
      }
      const float* values = reinterpret_cast<const float*>(bytes->data() + want.size());
      if (outputs_checksum(values, p.rows * width) != p.checksum) {
        st = corrupt_data("predicted part " + path + " does not match the checksum its predictor recorded (" +
                          p.checksum + "): the file changed after it was written; run the prediction again");
        break;
      }
      st = write_all(fd, bytes->data() + want.size(), data_bytes, temp);
      next += p.rows;
    }
    if (st.ok() && next != rows)
      st = corrupt_data("the parts hold " + std::to_string(next) + " rows of " + std::to_string(rows));
    if (st.ok() && ::fsync(fd) != 0) st = io_error("fsync of " + temp + ": " + std::strerror(errno));
  }
  if (st.ok() && ::rename(temp.c_str(), out.c_str()) != 0)
    st = io_error("renaming " + temp + " to " + out + ": " + std::strerror(errno));
  if (!st.ok()) {
    ::unlink(temp.c_str());
    return st;
  }
  return fsync_directory(dir);
}

}  // namespace troupe::job
