// CSV with a header row: every column but the label is numeric and the columns are packed, in header
// order, into one field "features" — u8 when every value is an integer in [0, 255] (pixels; scaled
// to [0, 1] as inputs like any u8 field), else f32. The label column (named by `target`, else the
// one column named label, labels, y, target, class or cls) becomes a field of its own name: i32 when its
// values are integers, strings mapped to classes 0..K-1 in sorted order (the names kept in the
// field), else f32. Quoted values ("a,b", "" for a quote) are accepted; empty lines are skipped.
// Errors give file:line:column: a row with more or fewer values than the header, an empty value,
// a value that is not a number outside the label column.
#pragma once

#include <string>

#include "core/status.h"
#include "data/table.h"

namespace troupe::data {

struct CsvOptions {
  std::string target;  // the label column's name; empty: the conventional names above, or none
};

Expected<Table> read_csv(const std::string& path, const CsvOptions& options = {});

// The conventional label names, in the order they are looked for.
const std::vector<std::string>& conventional_target_names();

}  // namespace troupe::data
