#include "trainers/library/trainer_file_store.h"

#include <filesystem>

#include "core/durable_file.h"
#include "trainers/library/trainer_library_store.h"

namespace troupe {
namespace {

namespace fs = std::filesystem;

// True when the file at `path` exists and its bytes hash to `checksum`.
bool holds(const std::string& path, const std::string& checksum) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  auto bytes = read_whole_file(path, "model file", kMaxTrainerFileBytes);
  return bytes.ok() && xxh64_hex(*bytes) == checksum;
}

}  // namespace

Expected<std::string> put_trainer_file(gcs::Store& store, const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return not_found("model file " + path + " cannot be read: " + ec.message());
  if (size > kMaxTrainerFileBytes)
    return invalid_argument("model file " + path + " is " + std::to_string(size >> 20) + " MiB; the GCS ships at most " +
                            std::to_string(kMaxTrainerFileBytes >> 20) + " MiB to a job's nodes (train it in one "
                            "process with troupe train, or make the module smaller)");
  auto bytes = read_whole_file(path, "model file", kMaxTrainerFileBytes);
  if (!bytes.ok()) return bytes.status();
  const std::string sum = xxh64_hex(*bytes);
  auto stored = store.put_if_absent(kTrainerFileBlobTable, sum, *bytes);
  if (!stored.ok()) return stored.status().with_context("storing model file " + path + " in the GCS");
  return sum;
}

Expected<std::string> local_trainer_file(gcs::Store* store, const std::string& path, const std::string& checksum,
                                         const std::string& cache_dir) {
  if (holds(path, checksum)) return path;
  const std::string name = fs::path(path).filename().string();
  const fs::path dir = fs::path(cache_dir) / checksum;
  const std::string copy = (dir / (name.empty() ? "model" : name)).string();
  if (holds(copy, checksum)) return copy;  // fetched for an earlier job or actor
  const std::string what = "model file " + path + " (xxh64 " + checksum + ")";
  if (!store) return not_found(what + " is not on this machine: put it back, or export with the cluster up");
  auto bytes = store->get(kTrainerFileBlobTable, checksum);
  if (!bytes.ok()) return bytes.status().with_context("fetching " + what + " from the GCS");
  if (!bytes->has_value())
    return not_found(what + " is neither on this machine nor in the GCS (" + store->describe() +
                     "): submit the job again from a machine that has it");
  const std::string got = xxh64_hex(**bytes);
  if (got != checksum)
    return corrupt_data("the GCS copy of " + what + " hashes to " + got + ": it is corrupt; submit the job again");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create the model file cache " + dir.string() + ": " + ec.message());
  TROUPE_RETURN_IF_ERROR(write_file_durably(copy, **bytes, "model file"));
  return copy;
}

std::string default_trainer_file_cache() {
  return (fs::temp_directory_path() / "troupe-trainer-files").string();
}

}  // namespace troupe
