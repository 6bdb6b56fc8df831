// What `troupe data inspect` reports about a dataset: per split its examples and per field its
// type, per-example shape, file, minimum, maximum and mean, and for an integer field that looks like
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
  double min = 0, max = 0, mean = 0;
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
nlohmann::json to_json(const std::vector<SplitStats>& stats, const OpenedDataset& d);
std::string to_text(const std::vector<SplitStats>& stats, const OpenedDataset& d);

}  // namespace troupe::data
