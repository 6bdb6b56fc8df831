#include "data/readers/npy_reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <vector>

namespace troupe::data {

namespace {

// A value of the header's dict literal: a string, a bool, or a tuple of integers.
struct Value {
  enum Kind { string, boolean, tuple, other } kind = other;
  std::string text;
  bool flag = false;
  std::vector<int64_t> ints;
};

// A parser of the small Python literal NumPy writes. Errors say what was expected where.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  Expected<std::map<std::string, Value>> dict() {
    std::map<std::string, Value> out;
    skip();
    if (!eat('{')) return bad("'{' to open the header's dict");
    skip();
    while (!eat('}')) {
      auto key = quoted();
      if (!key.ok()) return key.status();
      skip();
      if (!eat(':')) return bad("':' after the key '" + *key + "'");
      skip();
      auto v = value();
      if (!v.ok()) return v.status();
      out[*key] = std::move(*v);
      skip();
      if (eat(',')) {
        skip();
        continue;
      }
      skip();
      if (!eat('}')) return bad("',' or '}' after the value of '" + *key + "'");
      break;
    }
    return out;
  }

 private:
  Status bad(const std::string& expected) const {
    return corrupt_data(where_ + ": garbled .npy header: expected " + expected + " at character " +
                        std::to_string(i_) + " of \"" + s_ + "\"");
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Expected<std::string> quoted() {
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return bad("a quoted string");
    const char q = s_[i_++];
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) ++i_;
    if (i_ >= s_.size()) return bad("the closing quote");
    return s_.substr(start, i_++ - start);
  }
  Expected<Value> value() {
    Value v;
    if (i_ < s_.size() && (s_[i_] == '\'' || s_[i_] == '"')) {
      auto t = quoted();
      if (!t.ok()) return t.status();
      v.kind = Value::string;
      v.text = *t;
      return v;
    }
    if (s_.compare(i_, 4, "True") == 0 || s_.compare(i_, 5, "False") == 0) {
      v.kind = Value::boolean;
      v.flag = s_[i_] == 'T';
      i_ += v.flag ? 4 : 5;
      return v;
    }
    if (eat('(')) {
      v.kind = Value::tuple;
      skip();
      while (!eat(')')) {
        const size_t start = i_;
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
        if (i_ == start) return bad("a non-negative integer in the shape");
        if (i_ - start > 18) return bad("a dimension below 10^18");
        v.ints.push_back(std::stoll(s_.substr(start, i_ - start)));
        eat('L');  // Python 2's long suffix
        skip();
        if (eat(',')) {
          skip();
          continue;
        }
        if (!eat(')')) return bad("',' or ')' in the shape");
        break;
      }
      return v;
    }
    if (i_ < s_.size() && s_[i_] == '[') {  // a structured dtype's field list: skip it whole
      int depth = 0;
      do {
        if (s_[i_] == '[') ++depth;
        if (s_[i_] == ']') --depth;
        ++i_;
      } while (i_ < s_.size() && depth > 0);
      v.kind = Value::other;
      v.text = "a list of fields";
      return v;
    }
    return bad("a string, True, False or a tuple");
  }

  const std::string& s_;
  const std::string& where_;
  size_t i_ = 0;
};

struct Descr {
  ElemType type;
  bool swap;  // big-endian data on this (little-endian) machine
};

Expected<Descr> parse_descr(const std::string& d, const std::string& where) {
  const std::string supported = "supported: u1 i1 u2 i2 u4 i4 i8 f2 f4 f8 and b1 (as u8)";
  if (d.size() < 3) return invalid_argument(where + ": dtype '" + d + "' is not supported (" + supported + ")");
  const char order = d[0];
  const std::string kind = d.substr(1);
  static const std::map<std::string, ElemType> types{
      {"u1", ElemType::u8},   {"b1", ElemType::u8},  {"i1", ElemType::i8},  {"u2", ElemType::u16},
      {"i2", ElemType::i16},  {"u4", ElemType::u32}, {"i4", ElemType::i32}, {"i8", ElemType::i64},
      {"f2", ElemType::f16},  {"f4", ElemType::f32}, {"f8", ElemType::f64}};
  auto it = types.find(kind);
  if (it == types.end() || (order != '<' && order != '>' && order != '|' && order != '=')) {
    std::string what = "dtype '" + d + "'";
    if (!kind.empty() && kind[0] == 'c') what += " (complex)";
    if (!kind.empty() && (kind[0] == 'U' || kind[0] == 'S')) what += " (strings)";
    if (!kind.empty() && kind[0] == 'O') what += " (Python objects)";
    if (kind == "u8") what += " (unsigned 64-bit)";
    return invalid_argument(where + ": " + what + " is not supported (" + supported + ")");
  }
  return Descr{it->second, order == '>' && elem_size(it->second) > 1};
}

uint32_t le32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t(p[3]) << 24); }

}  // namespace

Expected<Array> parse_npy(std::shared_ptr<const void> keep, const uint8_t* p, size_t n, const std::string& where) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (n < 10 || std::memcmp(p, magic, 6) != 0)
    return corrupt_data(where + ": not a .npy file (no \\x93NUMPY magic at its start)");
  const int major = p[6];
  if (major < 1 || major > 3)
    return corrupt_data(where + ": .npy format version " + std::to_string(major) + "." + std::to_string(p[7]) +
                        " is not one of 1.0, 2.0, 3.0");
  size_t header_len, offset;
  if (major == 1) {
    header_len = p[8] | (p[9] << 8);
    offset = 10;
  } else {
    if (n < 12) return corrupt_data(where + ": truncated .npy header (" + std::to_string(n) + " bytes)");
    header_len = le32(p + 8);
    offset = 12;
  }
  if (n < offset + header_len) {
    return corrupt_data(where + ": truncated .npy header: it announces " + std::to_string(header_len) +
                        " bytes, the file holds " + std::to_string(n - offset));
  }
  const std::string text(reinterpret_cast<const char*>(p + offset), header_len);
  offset += header_len;
  auto dict = HeaderParser(text, where).dict();
  if (!dict.ok()) return dict.status();
  auto field = [&](const char* key, Value::Kind kind) -> const Value* {
    auto it = dict->find(key);
    return it != dict->end() && it->second.kind == kind ? &it->second : nullptr;
  };
  const Value* descr = field("descr", Value::string);
  const Value* fortran = field("fortran_order", Value::boolean);
  const Value* shape = field("shape", Value::tuple);
  if (dict->count("descr") && !descr)
    return invalid_argument(where + ": a structured dtype (a list of fields) is not supported; save each field as its own array");
  if (!descr || !fortran || !shape)
    return corrupt_data(where + ": garbled .npy header: it needs 'descr' (a string), 'fortran_order' (True/False) and "
                        "'shape' (a tuple): \"" + text + "\"");
  auto d = parse_descr(descr->text, where);
  if (!d.ok()) return d.status();
  if (fortran->flag && shape->ints.size() > 1)
    return invalid_argument(where + ": fortran_order (column-major) arrays are not supported; save it with "
                            "np.save(path, np.ascontiguousarray(a))");
  Array a;
  a.type = d->type;
  a.shape = shape->ints;
  const int64_t elements = shape_product(a.shape);
  if (elements < 0) return corrupt_data(where + ": the shape in the .npy header overflows");
  const size_t need = static_cast<size_t>(elements) * elem_size(a.type);
  const size_t have = n - offset;
  if (have < need) {
    return corrupt_data(where + ": truncated: " + std::to_string(have) + " bytes of data, the header's shape " +
                        describe(a.type, a.shape) + " needs " + std::to_string(need));
  }
  if (have > need)
    return corrupt_data(where + ": " + std::to_string(have - need) + " bytes after the data the header describes (" +
                        describe(a.type, a.shape) + ")");
  if (!d->swap) {
    a.keep = std::move(keep);
    a.bytes = p + offset;
    return a;
  }
  std::vector<uint8_t> swapped(p + offset, p + offset + need);
  const size_t w = elem_size(a.type);
  for (size_t i = 0; i < need; i += w) std::reverse(swapped.begin() + i, swapped.begin() + i + w);
  return owned_array(a.type, a.shape, std::move(swapped));
}

Expected<Array> read_npy(const std::string& path) {
  auto f = map_file(path);
  if (!f.ok()) return f.status();
  return parse_npy(f->keep, f->data, f->size, path);
}

}  // namespace troupe::data
