// A dataset split in memory or mapped: named fields, each an Array whose first dimension counts the
// examples (data/array.h), all of the same length. An example is one row of every field.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/array.h"

namespace troupe::data {

struct Field {
  std::string name;
  Array array;
  std::string source;                // the file (or file[member]) it came from, for errors
  std::vector<std::string> columns;  // CSV: the header names packed into this field, in order
  std::vector<std::string> classes;  // string labels mapped to 0..K-1 (CSV), in class order
};

struct Table {
  std::vector<Field> fields;

  int64_t count() const { return fields.empty() ? 0 : fields.front().array.count(); }
  const Field* find(const std::string& name) const;
  std::vector<std::string> names() const;
  // invalid_argument when fields differ in length (naming both and their files), when a name
  // repeats, or when there are no fields.
  Status check(const std::string& where) const;
};

// Text labels as classes: the distinct labels in sorted order become classes 0..K-1 (their names in
// `names`); the result is an i32 field of one class per label (CSV and WebDataset .txt labels).
Array text_classes(const std::vector<std::string>& labels, std::vector<std::string>* names);

// "image, label" for messages.
std::string join(const std::vector<std::string>& names);

}  // namespace troupe::data
