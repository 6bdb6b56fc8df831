// Shipping a trainer library through the GCS: the submitting process stores the file once, keyed by
// its checksum; every node that hosts one of the job's actors fetches it into a local cache and
// loads it from there (trainers/library/trainer_library.h).
//
// Two tables: "trainer_library_blobs" holds the bytes, "trainer_libraries" the record (name,
// checksum, troupe version, ABI, size, trainers), written after the bytes. Storing the same bytes
// again changes nothing. Libraries are limited to kMaxTrainerLibraryBytes: one Redis value, sent
// within the store's deadline; a trainer library is typically well under 10 MiB.
#pragma once

#include <cstddef>
#include <string>

#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe {

constexpr size_t kMaxTrainerLibraryBytes = size_t{64} << 20;  // 64 MiB
constexpr const char* kTrainerLibraryBlobTable = "trainer_library_blobs";

// xxh64 (seed 0) of `bytes` as 16 lowercase hex digits.
std::string xxh64_hex(const std::string& bytes);

// Loads the library at `path` in this process (which checks its version and learns its trainers),
// then stores its bytes and record. Errors: those of load_trainer_library; invalid_argument for a
// file over the size limit; io_error reading it; the store's errors.
Expected<gcs::TrainerLibraryRecord> put_trainer_library(gcs::Store& store, const std::string& path);

// The local path of the library stored under `checksum`: <cache_dir>/<checksum>/<file name>,
// written there (to a temporary name, then renamed, so a reader never sees half a file) unless a
// copy with the right checksum is already there. The bytes are checked against the checksum when
// fetched and when an existing copy is reused. Errors: not_found (no such library in the GCS),
// corrupt_data (the stored bytes do not match their checksum, or the record is malformed),
// io_error (the cache directory is not writable), the store's errors.
Expected<std::string> fetch_trainer_library(gcs::Store& store, const std::string& checksum,
                                            const std::string& cache_dir);

}  // namespace troupe
