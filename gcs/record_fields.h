// Helpers of gcs/records.cc (internal to troupe_gcs): writing record fields with msgpack, and
// `Fields`, which reads the elements of a msgpack array in order under field names so that every
// decoding error says which record and field is wrong ("node record: field 'pid': expected an
// integer, found a string"). Nothing here throws.
#pragma once

#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "core/codec.h"
#include "gcs/records.h"

namespace troupe::gcs::record_detail {

// ---- writing ----

inline void put_str(Packer& pk, const std::string& s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}
inline void put_strings(Packer& pk, const std::vector<std::string>& v) {
  pk.pack_array(static_cast<uint32_t>(v.size()));
  for (const std::string& s : v) put_str(pk, s);
}
inline void put_bin(Packer& pk, const std::string& s) {
  pk.pack_bin(static_cast<uint32_t>(s.size()));
  pk.pack_bin_body(s.data(), static_cast<uint32_t>(s.size()));
}
inline void put_resources(Packer& pk, const Resources& r) {
  pk.pack_array(3);
  pk.pack_double(r.cpus);
  pk.pack_double(r.gpus);
  pk.pack_int64(r.memory_bytes);
}
// Starts a record of `fields` fields after the version.
inline void begin(Packer& pk, uint32_t fields) {
  pk.pack_array(fields + 1);
  pk.pack_uint32(kRecordSchemaVersion);
}
template <class Fn>
std::string write(Fn&& fn) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  fn(pk);
  return std::string(buf.data(), buf.size());
}

// ---- reading ----

inline const char* kind_of(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a bool";
    case msgpack::type::POSITIVE_INTEGER: return "an unsigned integer";
    case msgpack::type::NEGATIVE_INTEGER: return "a negative integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "binary bytes";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    case msgpack::type::EXT: return "an ext value";
  }
  return "an unknown type";
}

// Reads the elements of one msgpack array in order, each under a field name used in errors:
// "node record: field 'pid': expected an integer, found a string".
class Fields {
 public:
  Fields(const msgpack::object& array, uint32_t first, std::string what)
      : o_(array), i_(first), what_(std::move(what)) {}

  Status str(const char* name, std::string* out) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::STR) return wrong(name, "a string", *o);
    out->assign(o->via.str.ptr, o->via.str.size);
    return {};
  }
  Status bin(const char* name, std::string* out) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::BIN) return wrong(name, "binary bytes", *o);
    out->assign(o->via.bin.ptr, o->via.bin.size);
    return {};
  }
  Status boolean(const char* name, bool* out) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::BOOLEAN) return wrong(name, "a bool", *o);
    *out = o->via.boolean;
    return {};
  }
  Status i64(const char* name, int64_t* out) { return integer(name, INT64_MIN, INT64_MAX, out); }
  Status i32(const char* name, int* out) {
    int64_t v = 0;
    TROUPE_RETURN_IF_ERROR(integer(name, INT_MIN, INT_MAX, &v));
    *out = static_cast<int>(v);
    return {};
  }
  Status u64(const char* name, uint64_t* out) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::POSITIVE_INTEGER) return wrong(name, "an unsigned integer", *o);
    *out = o->via.u64;
    return {};
  }
  Status f64(const char* name, double* out) {
    const msgpack::object* o = next();
    // msgpack-c packs a double that holds an integral value as an integer: accept both.
    switch (o->type) {
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64: *out = o->via.f64; return {};
      case msgpack::type::POSITIVE_INTEGER: *out = static_cast<double>(o->via.u64); return {};
      case msgpack::type::NEGATIVE_INTEGER: *out = static_cast<double>(o->via.i64); return {};
      default: return wrong(name, "a number", *o);
    }
  }
  template <class Tag>
  Status id(const char* name, Id<Tag>* out) {
    return unpack_id(*next(), out, field(name));
  }
  // An enum stored as an unsigned integer in 0..max.
  template <class E>
  Status enumeration(const char* name, uint8_t max, E* out) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::POSITIVE_INTEGER) return wrong(name, "an unsigned integer", *o);
    if (o->via.u64 > max) {
      return corrupt_data(field(name) + ": unknown value " + std::to_string(o->via.u64) + " (known: 0.." +
                          std::to_string(max) + ")");
    }
    *out = static_cast<E>(o->via.u64);
    return {};
  }
  // A nested array of exactly `n` elements; `*inner` reads it.
  Status nested(const char* name, uint32_t n, Fields* inner) {
    const msgpack::object* o = next();
    TROUPE_RETURN_IF_ERROR(check_array(*o, n, field(name)));
    *inner = Fields(*o, 0, field(name));
    return {};
  }
  // A nested array of any length whose elements are read by `each(Fields&, index)`.
  template <class T, class Each>
  Status list(const char* name, uint32_t fields_per_item, std::vector<T>* out, Each&& each) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::ARRAY) return wrong(name, "an array", *o);
    std::vector<T> items(o->via.array.size);
    for (uint32_t k = 0; k < o->via.array.size; ++k) {
      const std::string what = field((std::string(name) + "[" + std::to_string(k) + "]").c_str());
      TROUPE_RETURN_IF_ERROR(check_array(o->via.array.ptr[k], fields_per_item, what));
      Fields item(o->via.array.ptr[k], 0, what);
      TROUPE_RETURN_IF_ERROR(each(item, &items[k]));
    }
    *out = std::move(items);
    return {};
  }
  // A nested array of strings.
  Status strings(const char* name, std::vector<std::string>* out) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::ARRAY) return wrong(name, "an array", *o);
    std::vector<std::string> items;
    for (uint32_t k = 0; k < o->via.array.size; ++k) {
      const msgpack::object& item = o->via.array.ptr[k];
      if (item.type != msgpack::type::STR) {
        return wrong((std::string(name) + "[" + std::to_string(k) + "]").c_str(), "a string", item);
      }
      items.emplace_back(item.via.str.ptr, item.via.str.size);
    }
    *out = std::move(items);
    return {};
  }
  // A nested array of integers, each in the range of int.
  Status ints(const char* name, std::vector<int>* out) {
    const msgpack::object* o = next();
    if (o->type != msgpack::type::ARRAY) return wrong(name, "an array", *o);
    Fields items(*o, 0, what_);
    std::vector<int> v(o->via.array.size);
    for (uint32_t k = 0; k < o->via.array.size; ++k) {
      TROUPE_RETURN_IF_ERROR(items.i32((std::string(name) + "[" + std::to_string(k) + "]").c_str(), &v[k]));
    }
    *out = std::move(v);
    return {};
  }
  Status resources(const char* name, Resources* out) {
    Fields r(o_, 0, "");
    TROUPE_RETURN_IF_ERROR(nested(name, 3, &r));
    TROUPE_RETURN_IF_ERROR(r.f64("cpus", &out->cpus));
    TROUPE_RETURN_IF_ERROR(r.f64("gpus", &out->gpus));
    return r.i64("memory_bytes", &out->memory_bytes);
  }

  static Status check_array(const msgpack::object& o, uint32_t n, const std::string& what) {
    if (o.type != msgpack::type::ARRAY) {
      return corrupt_data(what + ": expected an array of " + std::to_string(n) + " fields, found " + kind_of(o));
    }
    if (o.via.array.size != n) {
      return corrupt_data(what + ": expected " + std::to_string(n) + " fields, found " +
                          std::to_string(o.via.array.size));
    }
    return {};
  }

 private:
  // Callers checked the array length first, so `i_` stays in range.
  const msgpack::object* next() { return &o_.via.array.ptr[i_++]; }
  std::string field(const char* name) const { return what_ + (what_.empty() ? "" : ": ") + "field '" + name + "'"; }
  Status wrong(const char* name, const char* expected, const msgpack::object& o) const {
    return corrupt_data(field(name) + ": expected " + expected + ", found " + kind_of(o));
  }
  Status integer(const char* name, int64_t lo, int64_t hi, int64_t* out) {
    const msgpack::object* o = next();
    int64_t v = 0;
    if (o->type == msgpack::type::POSITIVE_INTEGER) {
      if (o->via.u64 > static_cast<uint64_t>(hi)) return out_of_range(name, std::to_string(o->via.u64), lo, hi);
      v = static_cast<int64_t>(o->via.u64);
    } else if (o->type == msgpack::type::NEGATIVE_INTEGER) {
      if (o->via.i64 < lo) return out_of_range(name, std::to_string(o->via.i64), lo, hi);
      v = o->via.i64;
    } else {
      return wrong(name, "an integer", *o);
    }
    *out = v;
    return {};
  }
  Status out_of_range(const char* name, const std::string& v, int64_t lo, int64_t hi) const {
    return corrupt_data(field(name) + ": " + v + " is out of range [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
  }

  msgpack::object o_;
  uint32_t i_;
  std::string what_;
};

// Parses `bytes` as [version, `n` fields] and hands the fields to `read`, which fills a fresh
// record; `*out` is assigned only when everything decoded.
template <class R, class Read>
Status read_record(const std::string& bytes, const char* kind, uint32_t n, R* out, Read&& read) {
  const std::string what = std::string(kind) + " record";
  msgpack::object_handle h;
  TROUPE_RETURN_IF_ERROR(parse_msgpack(bytes, &h, what));
  const msgpack::object& o = h.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size == 0) {
    return corrupt_data(what + ": expected an array [schema version, fields...], found " +
                        (o.type == msgpack::type::ARRAY ? std::string("an empty array") : kind_of(o)));
  }
  const msgpack::object& v = o.via.array.ptr[0];
  if (v.type != msgpack::type::POSITIVE_INTEGER) {
    return corrupt_data(what + ": schema version: expected an unsigned integer, found " + kind_of(v));
  }
  if (v.via.u64 != kRecordSchemaVersion) {
    return Status(Code::version_mismatch, what + " of schema version " + std::to_string(v.via.u64) +
                                              "; this troupe reads schema version " +
                                              std::to_string(kRecordSchemaVersion) +
                                              " — upgrade troupe or clear the GCS");
  }
  if (o.via.array.size != n + 1) {
    return corrupt_data(what + ": expected " + std::to_string(n) + " fields after the schema version, found " +
                        std::to_string(o.via.array.size - 1));
  }
  Fields f(o, 1, what);
  R r;
  TROUPE_RETURN_IF_ERROR(read(f, r));
  *out = std::move(r);
  return {};
}

}  // namespace troupe::gcs::record_detail
