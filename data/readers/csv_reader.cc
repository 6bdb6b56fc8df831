#include "data/readers/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace troupe::data {

namespace {

struct Cell {
  std::string text;
  size_t column;  // 1-based character column where the value starts
};

// Splits one line (without its newline) into cells; false on an unterminated quote.
bool split_line(const char* p, size_t n, std::vector<Cell>* cells, size_t* bad_column) {
  cells->clear();
  size_t i = 0;
  while (true) {
    Cell c;
    c.column = i + 1;
    if (i < n && p[i] == '"') {
      ++i;
      while (true) {
        if (i >= n) {
          *bad_column = c.column;
          return false;
        }
        if (p[i] == '"') {
          if (i + 1 < n && p[i + 1] == '"') {
            c.text += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        c.text += p[i++];
      }
      while (i < n && p[i] != ',') c.text += p[i++];  // text after the closing quote: kept, then checked
    } else {
      while (i < n && p[i] != ',') c.text += p[i++];
    }
    cells->push_back(std::move(c));
    if (i >= n) return true;
    ++i;  // the comma
  }
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) --b;
  return s.substr(a, b - a);
}

bool parse_number(const std::string& s, double* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  auto r = std::from_chars(b, e, *out);
  return r.ec == std::errc() && r.ptr == e;
}

// The non-empty lines of a mapped CSV file, one at a time, with the place of a cell for messages.
struct LineReader {
  std::string path;
  const char* text;
  size_t size;
  size_t pos = 0, line_no = 0;

  // The next non-empty line: its text and number; false at the end.
  bool next(const char** p, size_t* n) {
    while (pos < size) {
      const char* start = text + pos;
      const void* nl = std::memchr(start, '\n', size - pos);
      size_t len = nl ? static_cast<const char*>(nl) - start : size - pos;
      pos += len + (nl ? 1 : 0);
      ++line_no;
      if (len > 0 && start[len - 1] == '\r') --len;
      if (len == 0) continue;
      *p = start;
      *n = len;
      return true;
    }
    return false;
  }
  std::string at(size_t column) const { return path + ":" + std::to_string(line_no) + ":" + std::to_string(column); }
};

// The column names of the header row (the first non-empty line).
Expected<std::vector<std::string>> read_header(LineReader& lines, std::vector<Cell>* cells) {
  const char* lp;
  size_t ln;
  if (!lines.next(&lp, &ln)) return invalid_argument(lines.path + ": empty CSV file (it needs a header row)");
  size_t bad = 0;
  if (ln >= 3 && std::memcmp(lp, "\xEF\xBB\xBF", 3) == 0) {  // a UTF-8 byte order mark (Excel's CSV)
    lp += 3;
    ln -= 3;
  }
  if (!split_line(lp, ln, cells, &bad)) return invalid_argument(lines.at(bad) + ": unterminated quote in the header");
  std::vector<std::string> header;
  for (const Cell& c : *cells) header.push_back(trim(c.text));
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i].empty()) return invalid_argument(lines.at((*cells)[i].column) + ": an empty column name in the header");
  return header;
}

// The label column's index: options.target, else the first conventional name; -1 for none.
Expected<int> target_column(const std::string& path, const std::vector<std::string>& header, const CsvOptions& options) {
  if (!options.target.empty()) {
    auto it = std::find(header.begin(), header.end(), options.target);
    if (it == header.end())
      return invalid_argument(path + ": no column named '" + options.target + "' for the target (columns: " +
                              join(header) + ")");
    return static_cast<int>(it - header.begin());
  }
  for (const auto& name : conventional_target_names()) {
    auto it = std::find(header.begin(), header.end(), name);
    if (it != header.end()) return static_cast<int>(it - header.begin());
  }
  return -1;
}

// What the data rows held: the feature values row by row, and the labels as text and as numbers.
struct Columns {
  std::vector<float> values;
  std::vector<std::string> labels;
  std::vector<double> label_values;
  bool all_bytes = true, label_numeric = true, label_integer = true;
  std::string label_kind_changed;  // where a text label first met a numeric one (or the reverse)
  int64_t rows = 0;
};

// Reads every data row after the header into *out.
Status read_rows(LineReader& lines, const std::vector<std::string>& header, int target, Columns* out) {
  const size_t width = header.size();
  std::vector<Cell> cells;
  const char* lp;
  size_t ln;
  size_t bad = 0;
  while (lines.next(&lp, &ln)) {
    if (!split_line(lp, ln, &cells, &bad)) return invalid_argument(lines.at(bad) + ": unterminated quote");
    if (cells.size() != width) {
      return invalid_argument(lines.path + ":" + std::to_string(lines.line_no) + ": " + std::to_string(cells.size()) +
                              " values, the header has " + std::to_string(width) + " columns (a ragged row)");
    }
    for (size_t c = 0; c < width; ++c) {
      const std::string v = trim(cells[c].text);
      if (v.empty())
        return invalid_argument(lines.at(cells[c].column) + ": an empty value in column '" + header[c] +
                                "' (missing values are not supported; fill or drop them)");
      double d;
      const bool numeric = parse_number(v, &d);
      if (static_cast<int>(c) == target) {
        out->labels.push_back(v);
        if (out->rows > 0 && out->label_kind_changed.empty() &&
            numeric != (out->label_values.size() == static_cast<size_t>(out->rows)))
          out->label_kind_changed = lines.at(cells[c].column) + ": '" + v + "' in the label column '" + header[c] +
                                    "', whose " + (numeric ? "first labels are text" : "first labels are numbers") +
                                    ": a label column holds classes of one kind (fix or drop the row)";
        if (numeric) {
          out->label_values.push_back(d);
          if (d != std::floor(d) || std::fabs(d) > 2147483647.0) out->label_integer = false;
        } else {
          out->label_numeric = false;
        }
        continue;
      }
      if (!numeric || !std::isfinite(d))
        return invalid_argument(lines.at(cells[c].column) + ": '" + v + "' in column '" + header[c] +
                                "' is not a finite number (only the label column may hold text)");
      if (!(d >= 0 && d <= 255 && d == std::floor(d))) out->all_bytes = false;
      out->values.push_back(static_cast<float>(d));
    }
    ++out->rows;
  }
  return {};
}

// The field "features": every column but the label's, u8 when all values are bytes, else f32.
Field features_field(const std::string& path, std::vector<std::string> names, size_t features, const Columns& c) {
  Field fx;
  fx.name = "features";
  fx.source = path;
  fx.columns = std::move(names);
  const std::vector<int64_t> shape{c.rows, static_cast<int64_t>(features)};
  if (c.all_bytes && c.rows > 0) {
    std::vector<uint8_t> b(c.values.size());
    for (size_t i = 0; i < c.values.size(); ++i) b[i] = static_cast<uint8_t>(c.values[i]);
    fx.array = owned_array(ElemType::u8, shape, std::move(b));
  } else {
    std::vector<uint8_t> b(c.values.size() * 4);
    std::memcpy(b.data(), c.values.data(), b.size());
    fx.array = owned_array(ElemType::f32, shape, std::move(b));
  }
  return fx;
}

// The label column's field: i32 for integer labels, f32 for other numbers, else text classes.
Field label_field(const std::string& path, const std::string& name, const Columns& c) {
  const int64_t rows = c.rows;
  Field fy;
  fy.name = name;
  fy.source = path;
  fy.columns = {name};
  std::vector<uint8_t> b(c.label_numeric ? static_cast<size_t>(rows) * 4 : 0);
  if (c.label_numeric && c.label_integer) {
    for (int64_t i = 0; i < rows; ++i) {
      const int32_t v = static_cast<int32_t>(c.label_values[i]);
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
    fy.array = owned_array(ElemType::i32, {rows}, std::move(b));
  } else if (c.label_numeric) {
    for (int64_t i = 0; i < rows; ++i) {
      const float v = static_cast<float>(c.label_values[i]);
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
    fy.array = owned_array(ElemType::f32, {rows}, std::move(b));
  } else {  // text labels: classes in sorted order
    fy.array = text_classes(c.labels, &fy.classes);
  }
  return fy;
}

}  // namespace

const std::vector<std::string>& conventional_target_names() {
  static const std::vector<std::string> names{"label", "labels", "y", "target", "class", "cls"};
  return names;
}

Expected<Table> read_csv(const std::string& path, const CsvOptions& options) {
  auto f = map_file(path);
  if (!f.ok()) return f.status();
  LineReader lines{path, reinterpret_cast<const char*>(f->data), f->size};
  std::vector<Cell> cells;
  auto header = read_header(lines, &cells);
  if (!header.ok()) return header.status();
  auto target = target_column(path, *header, options);
  if (!target.ok()) return target.status();
  const size_t width = header->size();
  const size_t features = width - (*target >= 0 ? 1 : 0);
  Columns columns;
  TROUPE_RETURN_IF_ERROR(read_rows(lines, *header, *target, &columns));
  if (!columns.label_kind_changed.empty()) return invalid_argument(columns.label_kind_changed);
  Table t;
  std::vector<std::string> feature_names;
  for (size_t c = 0; c < width; ++c)
    if (static_cast<int>(c) != *target) feature_names.push_back((*header)[c]);
  if (features > 0) t.fields.push_back(features_field(path, std::move(feature_names), features, columns));
  if (*target >= 0) t.fields.push_back(label_field(path, (*header)[*target], columns));
  if (columns.rows == 0) return invalid_argument(path + ": no data rows after the header");
  return t;
}

}  // namespace troupe::data
