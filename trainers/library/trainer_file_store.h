// A model's file (the torchscript module: trainers/setup/model_args.h) shipped through the GCS
// with a cluster job, as --lib libraries are (trainer_library_store.h), so the nodes need not hold
// it at the submitter's path:
//
//   submit:  put_trainer_file   the bytes once into table "trainer_file_blobs", keyed by their
//                               xxh64 (storing the same bytes again changes nothing); the job's
//                               spec records the checksum beside the path (JobSpec::model_file_sum)
//   worker,  local_trainer_file the path itself when it holds those bytes, else the GCS's copy,
//   export                      fetched into <cache>/<checksum>/<file name> (written to a temporary
//                               name, then renamed; checked against the checksum when fetched and
//                               when a cached copy is reused)
//
// Files are limited to kMaxTrainerFileBytes: one Redis value, sent within the store's deadline.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe {

constexpr size_t kMaxTrainerFileBytes = size_t{64} << 20;  // 64 MiB
constexpr const char* kTrainerFileBlobTable = "trainer_file_blobs";

// Stores the bytes of `path` and returns their checksum (xxh64, 16 hex digits). invalid_argument for
// a file over the limit; not_found / io_error reading it; the store's errors.
Expected<std::string> put_trainer_file(gcs::Store& store, const std::string& path);

// The file to read `path` (stored with `checksum`) from on this machine: `path` when its bytes hash
// to `checksum`, else the GCS's copy under `cache_dir` (a null `store`: none to fetch). Errors:
// not_found (neither a matching file at `path` nor a copy in the GCS, saying what to do),
// corrupt_data (the GCS copy does not match its checksum), io_error (the cache is not writable),
// the store's errors.
Expected<std::string> local_trainer_file(gcs::Store* store, const std::string& path, const std::string& checksum,
                                         const std::string& cache_dir);

// The cache local_trainer_file uses by default: <temp dir>/troupe-trainer-files.
std::string default_trainer_file_cache();

}  // namespace troupe
