// NumPy's .npz archives (np.savez: stored, np.savez_compressed: deflated; NumPy writes ZIP64
// entries), read with libzip: every member NAME.npy is the array NAME (data/readers/npy_reader.h),
// decompressed into memory. Members that are not .npy files are refused, naming them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/array.h"

namespace troupe::data {

// The archive's arrays, by member name without ".npy", in the archive's order.
Expected<std::vector<std::pair<std::string, Array>>> read_npz(const std::string& path);

}  // namespace troupe::data
