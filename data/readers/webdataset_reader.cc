#include "data/readers/webdataset_reader.h"

#include <archive.h>
#include <archive_entry.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "data/path_names.h"
#include "data/readers/jpeg_decoder.h"
#include "data/readers/npy_reader.h"
#include "data/readers/png_decoder.h"

namespace troupe::data {

namespace {

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

std::string error_of(archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown error";
}


// One field's values, example by example, as bytes of one type and per-example shape.
struct Column {
  ElemType type = ElemType::u8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  bool is_text = false;            // a .txt field: labels gathered as text, classes at the end
  std::vector<std::string> text;
  std::string first;              // the member that set type and shape
};

// A decoded member: its type, per-example shape and bytes (or text for .txt).
struct Value {
  ElemType type = ElemType::u8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  std::string text;
  bool is_text = false;
};

Expected<Value> decode(const std::string& ext, const std::vector<uint8_t>& data, const std::string& where) {
  Value v;
  if (ext == "png" || ext == "jpg" || ext == "jpeg") {
    auto img = ext == "png" ? decode_png(data.data(), data.size(), where) : decode_jpeg(data.data(), data.size(), where);
    if (!img.ok()) return img.status();
    v.shape = {img->height, img->width, img->channels};
    v.bytes = std::move(img->pixels);
    return v;
  }
  if (ext == "cls") {
    std::string s(data.begin(), data.end());
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    char* end = nullptr;
    const long c = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || c < 0 || c > 2147483647L)
      return invalid_argument(where + ": '" + s + "' is not a class number (a .cls member holds one integer >= 0)");
    const int32_t c32 = static_cast<int32_t>(c);
    v.type = ElemType::i32;
    v.bytes.resize(4);
    std::memcpy(v.bytes.data(), &c32, 4);
    return v;
  }
  if (ext == "txt") {
    v.is_text = true;
    v.type = ElemType::i32;
    v.text.assign(data.begin(), data.end());
    while (!v.text.empty() && (v.text.back() == '\n' || v.text.back() == '\r')) v.text.pop_back();
    return v;
  }
  // .npy
  auto keep = std::make_shared<std::vector<uint8_t>>(data);
  auto a = parse_npy(keep, keep->data(), keep->size(), where);
  if (!a.ok()) return a.status();
  v.type = a->type;
  v.shape = a->shape;
  v.bytes.assign(a->bytes, a->bytes + a->byte_size());
  return v;
}

const std::set<std::string>& known() {
  static const std::set<std::string> k{"png", "jpg", "jpeg", "cls", "txt", "npy"};
  return k;
}

}  // namespace

bool looks_like_tar(const std::string& p) {
  for (const char* t : {".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst", ".tar.bz2"})
    if (ends_with(p, t)) return true;
  return false;
}

Expected<Table> read_webdataset(const std::vector<std::string>& shards) {
  std::map<std::string, Column> columns;
  std::vector<std::string> order;  // field order: the first example's extensions
  int64_t examples = 0;
  std::string key;                 // the example being gathered
  std::map<std::string, Value> current;
  std::string current_where;
  // Appends the gathered example; every example has exactly the first one's fields.
  auto flush = [&]() -> Status {
    if (current.empty()) return {};
    if (examples == 0) {
      for (auto& [ext, v] : current) {
        order.push_back(ext);
        Column& c = columns[ext];
        c.type = v.type;
        c.shape = v.shape;
        c.first = current_where + "/" + key + "." + ext;
        c.is_text = v.is_text;
      }
    }
    for (const auto& ext : order) {
      if (!current.count(ext))
        return invalid_argument(current_where + ": example '" + key + "' has no ." + ext +
                                " member (every example needs the fields of the first: " + join(order) + ")");
    }
    for (auto& [ext, v] : current) {
      auto it = columns.find(ext);
      if (it == columns.end())
        return invalid_argument(current_where + ": example '" + key + "' has a ." + ext +
                                " member the first example lacks (fields: " + join(order) + ")");
      Column& c = it->second;
      if (v.type != c.type || v.shape != c.shape)
        return invalid_argument(current_where + ": " + key + "." + ext + " is " + describe(v.type, v.shape) + ", " +
                                c.first + " was " + describe(c.type, c.shape) + " (every example must match)");
      if (c.is_text) {
        c.text.push_back(std::move(v.text));
      } else {
        c.bytes.insert(c.bytes.end(), v.bytes.begin(), v.bytes.end());
      }
    }
    ++examples;
    current.clear();
    return {};
  };
  for (const std::string& shard : shards) {
    std::unique_ptr<archive, ArchiveCloser> a(archive_read_new());
    archive_read_support_filter_all(a.get());
    archive_read_support_format_tar(a.get());
    archive_read_support_format_gnutar(a.get());
    const int opened = archive_read_open_filename(a.get(), shard.c_str(), size_t{1} << 20);
    if (opened != ARCHIVE_OK && opened != ARCHIVE_WARN)
      return corrupt_data(shard + ": not a readable tar shard: " + error_of(a.get()));
    archive_entry* e = nullptr;
    while (true) {
      const int r = archive_read_next_header(a.get(), &e);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) return corrupt_data(shard + ": damaged tar shard: " + error_of(a.get()));
      if (archive_entry_filetype(e) != AE_IFREG) continue;
      const std::string path = archive_entry_pathname(e);
      const size_t slash = path.find_last_of('/');
      const size_t dot = path.find('.', slash == std::string::npos ? 0 : slash + 1);
      if (dot == std::string::npos) continue;  // no extension: not a field
      const std::string k = path.substr(0, dot), ext = path.substr(dot + 1);
      const std::string kind = ext.substr(ext.find_last_of('.') + 1);  // "feat.npy" is decoded as .npy
      if (!known().count(kind)) continue;
      if (k != key || shard != current_where) {
        TROUPE_RETURN_IF_ERROR(flush());
        key = k;
        current_where = shard;
      }
      const la_int64_t size = archive_entry_size(e);
      std::vector<uint8_t> data;
      TROUPE_RETURN_IF_ERROR(read_claimed(
          [&](uint8_t* dst, size_t n) -> Expected<size_t> {
            const la_ssize_t r = archive_read_data(a.get(), dst, n);
            if (r < 0) return corrupt_data(shard + ": cannot read member " + path + ": " + error_of(a.get()));
            return static_cast<size_t>(r);
          },
          size > 0 ? static_cast<uint64_t>(size) : 0, &data, shard + "[" + path + "]"));
      if (current.count(ext))
        return invalid_argument(shard + ": two ." + ext + " members for example '" + k + "'");
      auto v = decode(kind, data, shard + "[" + path + "]");
      if (!v.ok()) return v.status();
      current[ext] = std::move(*v);
    }
    TROUPE_RETURN_IF_ERROR(flush());
  }
  if (examples == 0) return invalid_argument(shards.empty() ? std::string("no shards") : shards.front() +
                                             ": no examples (members with .png .jpg .cls .txt or .npy extensions)");
  Table t;
  for (const auto& ext : order) {
    Column& c = columns[ext];
    Field f;
    f.name = ext;
    f.source = shards.size() == 1 ? shards.front() : shards.front() + " (+" + std::to_string(shards.size() - 1) + " shards)";
    std::vector<int64_t> shape{examples};
    shape.insert(shape.end(), c.shape.begin(), c.shape.end());
    f.array = c.is_text ? text_classes(c.text, &f.classes) : owned_array(c.type, std::move(shape), std::move(c.bytes));
    t.fields.push_back(std::move(f));
  }
  return t;
}

}  // namespace troupe::data
