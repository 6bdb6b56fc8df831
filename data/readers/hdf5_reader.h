// HDF5 files (libhdf5): each dataset of a numeric type (integers of 1, 2, 4 or 8 bytes but not u64;
// f32, f64) is an array named by its path without the leading '/' ("x_train", "train/image"), read
// into memory a block of rows at a time (the type converted to native order by HDF5); 0-d datasets
// (a version number) are metadata and left out unless named. `only`
// names the datasets to read (a dataset.yaml's `datasets:`); empty reads every numeric one. A name
// that is not in the file is refused listing those that are.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/array.h"

namespace troupe::data {

Expected<std::vector<std::pair<std::string, Array>>> read_hdf5(const std::string& path,
                                                              const std::vector<std::string>& only = {});

bool looks_like_hdf5(const std::string& path);  // .h5 .hdf5 .hdf

}  // namespace troupe::data
