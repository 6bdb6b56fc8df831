// A prediction job's parts into its output (trainers/job/predict_worker.h): part-<shard>.npy files,
// one per ledger shard, each [rows, width] f32, concatenated in shard order into one .npy written
// durably (a temporary file beside it, fsync, rename, the directory fsync'd).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gcs/predict_accounting.h"

namespace troupe::job {

std::string part_path(const std::string& parts_dir, int shard);
// xxh64 of `n` floats' bytes, 16 hex digits.
std::string outputs_checksum(const float* values, int64_t n);

// Writes `parts` (ordered by shard, tiling [0, rows)) into `out`: each part file must hold a .npy of
// [part.rows, width] whose data hashes to part.checksum, else corrupt_data naming the part and what
// to do. io_error naming the path when writing fails (nothing is left at `out` then).
Status assemble_parts(const std::string& parts_dir, const std::vector<gcs::PredictedPart>& parts, int64_t rows,
                      int64_t width, const std::string& out);

}  // namespace troupe::job
