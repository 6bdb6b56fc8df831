#include "trainers/library/trainer_library_store.h"

#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/durable_file.h"
#include "core/version.h"
#include "gcs/tables.h"
#include "trainers/library/trainer_library.h"

namespace troupe {
namespace {

namespace fs = std::filesystem;

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot read trainer library " + path + ": " + std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return io_error("reading trainer library " + path + " failed");
  return bytes.str();
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string xxh64_hex(const std::string& bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(bytes.data(), bytes.size(), 0)));
  return hex;
}

Expected<gcs::TrainerLibraryRecord> put_trainer_library(gcs::Store& store, const std::string& path) {
  auto lib = load_trainer_library(path);
  if (!lib.ok()) return lib.status();
  auto bytes = read_file(path);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() > kMaxTrainerLibraryBytes) {
    return invalid_argument("trainer library " + path + " is " + std::to_string(bytes->size() >> 20) +
                            " MiB; the GCS takes at most " + std::to_string(kMaxTrainerLibraryBytes >> 20) +
                            " MiB (build it with -Os or strip it: strip --strip-unneeded)");
  }
  gcs::TrainerLibraryRecord r;
  r.checksum = xxh64_hex(*bytes);
  r.file_name = fs::path(path).filename().string();
  r.troupe_version = lib->troupe_version;
  r.abi = static_cast<int>(lib->abi);
  r.size = bytes->size();
  r.trainers = lib->trainers;
  r.stored_ms = now_ms();
  // Bytes first, then the record: whoever sees the record finds the bytes.
  auto stored = store.put_if_absent(kTrainerLibraryBlobTable, r.checksum, *bytes);
  if (!stored.ok()) return stored.status().with_context("storing trainer library " + path);
  TROUPE_RETURN_IF_ERROR(gcs::Table<gcs::TrainerLibraryRecord>(store).put(r).with_context(
      "recording trainer library " + path));
  return r;
}

Expected<std::string> fetch_trainer_library(gcs::Store& store, const std::string& checksum,
                                            const std::string& cache_dir) {
  auto record = gcs::Table<gcs::TrainerLibraryRecord>(store).get(checksum);
  if (!record.ok()) {
    if (record.status().code() == Code::not_found) {
      return not_found("no trainer library with checksum " + checksum + " in the GCS (" + store.describe() +
                       "); submit the job again with --lib");
    }
    return record.status();
  }
  const std::string file_name = fs::path(record->file_name).filename().string();
  if (file_name.empty() || file_name == "." || file_name == "..") {
    return corrupt_data("trainer library record " + checksum + " has no usable file name ('" + record->file_name + "')");
  }
  const fs::path dir = fs::path(cache_dir) / checksum;
  const std::string path = (dir / file_name).string();

  // A copy from an earlier job: use it if it is still what the checksum says.
  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto cached = read_file(path);
    if (cached.ok() && xxh64_hex(*cached) == checksum) return path;
  }
  auto bytes = store.get(kTrainerLibraryBlobTable, checksum);
  if (!bytes.ok()) return bytes.status().with_context("fetching trainer library " + record->file_name);
  if (!bytes->has_value()) {
    return corrupt_data("trainer library " + record->file_name + " (" + checksum + ") has a record but no bytes in " +
                        kTrainerLibraryBlobTable + "; submit the job again with --lib");
  }
  const std::string got = xxh64_hex(**bytes);
  if (got != checksum) {
    return corrupt_data("the stored bytes of trainer library " + record->file_name + " hash to " + got + ", not " +
                        checksum + ": the GCS copy is corrupt; submit the job again with --lib");
  }
  fs::create_directories(dir, ec);
  if (ec) return io_error("cannot create the trainer library cache " + dir.string() + ": " + ec.message());
  TROUPE_RETURN_IF_ERROR(write_file_durably(path, **bytes, "trainer library", 0755));
  return path;
}

}  // namespace troupe
