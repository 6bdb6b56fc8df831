#include "core/codec.h"

#include <climits>
#include <cstring>
#include <exception>

namespace troupe {
namespace {

const char* type_name(msgpack::type::object_type t) {
  switch (t) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER: return "unsigned integer";
    case msgpack::type::NEGATIVE_INTEGER: return "negative integer";
    case msgpack::type::FLOAT32: return "float32";
    case msgpack::type::FLOAT64: return "float64";
    case msgpack::type::STR: return "string";
    case msgpack::type::BIN: return "binary";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    case msgpack::type::EXT: return "ext";
  }
  return "unknown type";
}

Status wrong_type(const std::string& what, const char* expected, const msgpack::object& o) {
  return corrupt_data(what + ": expected " + expected + ", found " + type_name(o.type));
}

// `o` as an unsigned integer no larger than `max`.
Status get_uint(const msgpack::object& o, uint64_t max, uint64_t* out, const std::string& what) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return wrong_type(what, "an unsigned integer", o);
  if (o.via.u64 > max) {
    return corrupt_data(what + ": " + std::to_string(o.via.u64) + " is out of range (at most " + std::to_string(max) + ")");
  }
  *out = o.via.u64;
  return {};
}

// `o` as an array of exactly `n` elements.
Status get_array(const msgpack::object& o, uint32_t n, const std::string& what) {
  if (o.type != msgpack::type::ARRAY) return wrong_type(what, ("an array of " + std::to_string(n)).c_str(), o);
  if (o.via.array.size != n) {
    return corrupt_data(what + ": expected an array of " + std::to_string(n) + " elements, found " +
                        std::to_string(o.via.array.size));
  }
  return {};
}

// Lets bin and str payloads point into the input instead of being copied into the zone.
bool reference_input(msgpack::type::object_type, std::size_t, void*) { return true; }

template <class Fn>
std::string encode_with(Fn&& fn) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  detail::begin_record(pk);
  fn(pk);
  return detail::to_string(buf);
}

// Parses a standalone record and unpacks its payload with `unpack`.
template <class T, class Unpack>
Expected<T> decode_with(std::string_view bytes, const std::string& what, Unpack&& unpack) {
  msgpack::object_handle h;
  TROUPE_RETURN_IF_ERROR(parse_msgpack(bytes, &h, what));
  const msgpack::object* payload = nullptr;
  TROUPE_RETURN_IF_ERROR(open_record(h.get(), &payload, what));
  T value{};
  TROUPE_RETURN_IF_ERROR(unpack(*payload, &value, what));
  return value;
}

}  // namespace

namespace detail {
void begin_record(Packer& pk) {
  pk.pack_array(2);
  pk.pack_uint32(kCodecSchemaVersion);
}
}  // namespace detail

// ---- pack ----

void pack_status(Packer& pk, const Status& status) {
  pk.pack_array(2);
  pk.pack_uint32(static_cast<uint32_t>(status.code()));
  pk.pack_str(static_cast<uint32_t>(status.message().size()));
  pk.pack_str_body(status.message().data(), static_cast<uint32_t>(status.message().size()));
}

void pack_id_bytes(Packer& pk, const std::array<uint8_t, 16>& bytes) {
  pk.pack_bin(16);
  pk.pack_bin_body(reinterpret_cast<const char*>(bytes.data()), 16);
}

void pack_dtype(Packer& pk, DType dtype) { pk.pack_uint8(static_cast<uint8_t>(dtype)); }

void pack_device(Packer& pk, Device device) {
  pk.pack_array(2);
  pk.pack_uint8(device.is_cpu() ? 0 : 1);
  pk.pack_int32(device.index);  // a negative index is refused when decoding
}

void pack_shape(Packer& pk, const Shape& shape) {
  pk.pack_array(static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) pk.pack_int64(d);  // negative dimensions are refused when decoding
}

Status pack_tensor(Packer& pk, const Tensor& tensor) {
  for (int64_t d : tensor.shape()) {
    if (d < 0) return invalid_argument("cannot encode " + tensor.to_string() + ": negative dimension");
  }
  if (tensor.data() == nullptr && tensor.numel() != 0) {
    return invalid_argument("cannot encode " + tensor.to_string() + ": it has elements but no storage");
  }
  if (tensor.nbytes() > UINT32_MAX) {
    return invalid_argument("cannot encode " + tensor.to_string() + ": " + std::to_string(tensor.nbytes()) +
                            " bytes exceed the 4 GiB msgpack bin limit; send it in slices");
  }
  Tensor host = tensor;
  if (!tensor.device().is_cpu()) {
    auto copy = tensor.to(Device::cpu());
    if (!copy.ok()) return copy.status().with_context("encoding " + tensor.to_string() + " (copy to host)");
    host = std::move(copy.value());
  }
  pk.pack_array(3);
  pack_dtype(pk, host.dtype());
  pack_shape(pk, host.shape());
  uint32_t n = static_cast<uint32_t>(host.nbytes());
  pk.pack_bin(n);
  pk.pack_bin_body(static_cast<const char*>(host.data()), n);
  return {};
}

// ---- unpack ----

Status unpack_status(const msgpack::object& o, Status* out, const std::string& what) {
  TROUPE_RETURN_IF_ERROR(get_array(o, 2, what));
  uint64_t code = 0;
  TROUPE_RETURN_IF_ERROR(get_uint(o.via.array.ptr[0], static_cast<uint64_t>(Code::internal), &code, what + ": code"));
  const msgpack::object& m = o.via.array.ptr[1];
  if (m.type != msgpack::type::STR) return wrong_type(what + ": message", "a string", m);
  *out = Status(static_cast<Code>(code), std::string(m.via.str.ptr, m.via.str.size));
  return {};
}

Status unpack_id_bytes(const msgpack::object& o, std::array<uint8_t, 16>* out, const std::string& what) {
  if (o.type != msgpack::type::BIN) return wrong_type(what, "16 binary bytes", o);
  if (o.via.bin.size != 16) {
    return corrupt_data(what + ": expected 16 bytes, found " + std::to_string(o.via.bin.size));
  }
  std::memcpy(out->data(), o.via.bin.ptr, 16);
  return {};
}

Status unpack_dtype(const msgpack::object& o, DType* out, const std::string& what) {
  uint64_t v = 0;
  TROUPE_RETURN_IF_ERROR(get_uint(o, static_cast<uint64_t>(DType::bf16), &v, what + " (0 f32, 1 f16, 2 bf16)"));
  *out = static_cast<DType>(v);
  return {};
}

Status unpack_device(const msgpack::object& o, Device* out, const std::string& what) {
  TROUPE_RETURN_IF_ERROR(get_array(o, 2, what));
  uint64_t kind = 0, index = 0;
  TROUPE_RETURN_IF_ERROR(get_uint(o.via.array.ptr[0], 1, &kind, what + ": kind (0 cpu, 1 cuda)"));
  TROUPE_RETURN_IF_ERROR(get_uint(o.via.array.ptr[1], INT32_MAX, &index, what + ": index"));
  *out = kind == 0 ? Device::cpu() : Device::cuda(static_cast<int>(index));
  return {};
}

Status unpack_shape(const msgpack::object& o, Shape* out, const std::string& what) {
  if (o.type != msgpack::type::ARRAY) return wrong_type(what, "an array of dimensions", o);
  Shape shape(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    uint64_t d = 0;
    TROUPE_RETURN_IF_ERROR(get_uint(o.via.array.ptr[i], INT64_MAX, &d, what + ": dimension " + std::to_string(i)));
    shape[i] = static_cast<int64_t>(d);
  }
  *out = std::move(shape);
  return {};
}

Status unpack_tensor(const msgpack::object& o, Tensor* out, const std::string& what) {
  TROUPE_RETURN_IF_ERROR(get_array(o, 3, what + " ([dtype, shape, bytes])"));
  DType dtype = DType::f32;
  Shape shape;
  TROUPE_RETURN_IF_ERROR(unpack_dtype(o.via.array.ptr[0], &dtype, what + ": dtype"));
  TROUPE_RETURN_IF_ERROR(unpack_shape(o.via.array.ptr[1], &shape, what + ": shape"));
  const msgpack::object& b = o.via.array.ptr[2];
  if (b.type != msgpack::type::BIN) return wrong_type(what + ": data", "binary bytes", b);

  // numel * dtype_size, refusing shapes whose byte count overflows.
  uint64_t bytes = dtype_size(dtype);
  bool overflow = false;
  for (int64_t d : shape) overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  if (overflow || bytes != b.via.bin.size) {
    return corrupt_data(what + ": " + std::to_string(b.via.bin.size) + " data bytes do not match shape " +
                        shape_string(shape) + " of " + dtype_name(dtype) +
                        (overflow ? " (its size overflows)" : " (" + std::to_string(bytes) + " bytes)"));
  }
  Tensor t = Tensor::host(dtype, std::move(shape));
  if (bytes) std::memcpy(t.data(), b.via.bin.ptr, bytes);
  *out = std::move(t);
  return {};
}

// ---- records ----

Status parse_msgpack(std::string_view bytes, msgpack::object_handle* out, const std::string& what) {
  if (bytes.empty()) return corrupt_data(what + ": empty input (0 bytes)");
  const size_t n = bytes.size();
  // No container can hold more elements than there are input bytes; nesting is bounded.
  const msgpack::unpack_limit limit(n, n / 2 + 1, n, n, n, 64);
  size_t offset = 0;
  try {
    msgpack::unpack(*out, bytes.data(), n, offset, reference_input, nullptr, limit);
  } catch (const msgpack::insufficient_bytes&) {
    return corrupt_data(what + ": truncated msgpack (" + std::to_string(n) + " bytes end inside a value)");
  } catch (const msgpack::size_overflow& e) {
    return corrupt_data(what + ": malformed msgpack (" + e.what() + ": a length or nesting depth exceeds what " +
                        std::to_string(n) + " input bytes can hold)");
  } catch (const std::exception& e) {
    return corrupt_data(what + ": malformed msgpack (" + e.what() + ")");
  }
  if (offset != n) {
    return corrupt_data(what + ": " + std::to_string(n - offset) + " trailing bytes after the record");
  }
  return {};
}

Status open_record(const msgpack::object& o, const msgpack::object** payload, const std::string& what) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size == 0) {
    return corrupt_data(what + ": expected an array [schema version, value], found " +
                        (o.type == msgpack::type::ARRAY ? std::string("an empty array") : type_name(o.type)));
  }
  const msgpack::object& v = o.via.array.ptr[0];
  if (v.type != msgpack::type::POSITIVE_INTEGER) return wrong_type(what + ": schema version", "an unsigned integer", v);
  if (v.via.u64 != kCodecSchemaVersion) {
    return Status(Code::version_mismatch,
                  what + " has schema version " + std::to_string(v.via.u64) + " but this build of troupe reads version " +
                      std::to_string(kCodecSchemaVersion) + "; write and read it with matching troupe versions");
  }
  if (o.via.array.size != 2) {
    return corrupt_data(what + ": expected [schema version, value], found an array of " +
                        std::to_string(o.via.array.size) + " elements");
  }
  *payload = &o.via.array.ptr[1];
  return {};
}

std::string encode_status(const Status& status) {
  return encode_with([&](Packer& pk) { pack_status(pk, status); });
}

Status decode_status(std::string_view bytes, Status* out) {
  const std::string what = "status record";
  msgpack::object_handle h;
  TROUPE_RETURN_IF_ERROR(parse_msgpack(bytes, &h, what));
  const msgpack::object* payload = nullptr;
  TROUPE_RETURN_IF_ERROR(open_record(h.get(), &payload, what));
  return unpack_status(*payload, out, what);
}

std::string encode_dtype(DType dtype) {
  return encode_with([&](Packer& pk) { pack_dtype(pk, dtype); });
}
Expected<DType> decode_dtype(std::string_view bytes) {
  return decode_with<DType>(bytes, "dtype record", [](auto& o, auto* v, auto& w) { return unpack_dtype(o, v, w); });
}

std::string encode_device(Device device) {
  return encode_with([&](Packer& pk) { pack_device(pk, device); });
}
Expected<Device> decode_device(std::string_view bytes) {
  return decode_with<Device>(bytes, "device record", [](auto& o, auto* v, auto& w) { return unpack_device(o, v, w); });
}

std::string encode_shape(const Shape& shape) {
  return encode_with([&](Packer& pk) { pack_shape(pk, shape); });
}
Expected<Shape> decode_shape(std::string_view bytes) {
  return decode_with<Shape>(bytes, "shape record", [](auto& o, auto* v, auto& w) { return unpack_shape(o, v, w); });
}

Expected<std::string> encode_tensor(const Tensor& tensor) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  detail::begin_record(pk);
  TROUPE_RETURN_IF_ERROR(pack_tensor(pk, tensor));
  return detail::to_string(buf);
}
Expected<Tensor> decode_tensor(std::string_view bytes) {
  return decode_with<Tensor>(bytes, "tensor record", [](auto& o, auto* v, auto& w) { return unpack_tensor(o, v, w); });
}

}  // namespace troupe
