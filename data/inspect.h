// What `troupe data inspect` reports about a dataset: per split its examples and per field its
// type, per-example shape, file, minimum, maximum, mean and standard deviation, and for an integer field that looks like
// labels (one value per example) the class balance. Every element is read, so every file is checked
// to its end (a mapped file that shrank fails here, not mid-epoch).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/dataset_spec.h"

namespace troupe::data {

struct FieldStats {
  std::string name, type, shape, source;  // shape: "u8[28,28]"
  std::vector<int64_t> dims;               // the per-example shape
  double min = 0, max = 0, mean = 0, std = 0;  // over every element (std: the population's)
  int64_t non_finite = 0;
  std::map<int64_t, int64_t> classes;  // value -> examples, for integer scalar fields (<= 1000 values)
  std::vector<std::string> class_names;
};

struct SplitStats {
  std::string name;
  int64_t examples = 0;
  std::vector<FieldStats> fields;
};

std::vector<SplitStats> inspect(const OpenedDataset& d);
// One field's statistics (every element read; non-finite ones counted, not summed).
FieldStats field_stats(const Field& f);
nlohmann::json to_json(const std::vector<SplitStats>& stats, const OpenedDataset& d);
std::string to_text(const std::vector<SplitStats>& stats, const OpenedDataset& d);

// The statistics --normalize FILE reads (data/normalization.h): every field of the split
// `split` (the training one) with its type, mean and std, as stored in the files (u8 unscaled).
//   {"format": 1, "split": "train", "fields": {"x": {"type": "u8", "mean": 72.9, "std": 90.0}, ...}}
nlohmann::json normalization_stats(const std::vector<SplitStats>& stats, const std::string& split);

}  // namespace troupe::data
