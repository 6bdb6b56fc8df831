// msgpack codecs for the core types: Status, Id<Tag>, DType, Device, Shape and host Tensor.
//
// Two layers:
//  * pack_* / unpack_* write and read one value inside a larger msgpack record (GCS records embed
//    these types). They carry no version: the enclosing record carries its own schema version,
//    and must bump it whenever a format below changes.
//  * encode_* / decode_* make a standalone record: the array [kCodecSchemaVersion, value].
//
// Formats (schema version 1):
//   Status  [code (uint), message (str)]
//   Id      bin of 16 bytes
//   DType   uint (0 f32, 1 f16, 2 bf16)
//   Device  [kind (uint: 0 cpu, 1 cuda), index (uint)]
//   Shape   array of uint dimensions
//   Tensor  [dtype, shape, bin of shape_numel * dtype_size bytes, row-major]
//
// Decoding never throws and never trusts the input: a record of another schema version is
// version_mismatch naming both versions; anything malformed (truncated, wrong types, wrong array
// lengths, unknown enum values, byte counts not matching shape and dtype, trailing bytes) is
// corrupt_data saying what is wrong. On error, the output argument is left unchanged.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "core/device.h"
#include "core/dtype.h"
#include "core/ids.h"
#include "core/status.h"
#include "core/tensor.h"

namespace troupe {

constexpr uint32_t kCodecSchemaVersion = 1;

using Packer = msgpack::packer<msgpack::sbuffer>;

// ---- values inside larger records ----

void pack_status(Packer& pk, const Status& status);
void pack_id_bytes(Packer& pk, const std::array<uint8_t, 16>& bytes);
void pack_dtype(Packer& pk, DType dtype);
void pack_device(Packer& pk, Device device);
void pack_shape(Packer& pk, const Shape& shape);
// Packs a tensor's dtype, shape and bytes. A device tensor is copied to the host first; when that
// fails (no CUDA, no GPU) the error is returned and nothing is written to `pk`. A tensor without
// storage but with elements is invalid_argument, also with nothing written.
Status pack_tensor(Packer& pk, const Tensor& tensor);

// Each returns corrupt_data (prefixed with `what`, e.g. "job record: field 'weights'") when `o` is
// not a well-formed value of the type; `*out` is then unchanged.
Status unpack_status(const msgpack::object& o, Status* out, const std::string& what = "status");
Status unpack_id_bytes(const msgpack::object& o, std::array<uint8_t, 16>* out, const std::string& what = "id");
Status unpack_dtype(const msgpack::object& o, DType* out, const std::string& what = "dtype");
Status unpack_device(const msgpack::object& o, Device* out, const std::string& what = "device");
Status unpack_shape(const msgpack::object& o, Shape* out, const std::string& what = "shape");
// The result is a new owning host tensor holding a copy of the bytes.
Status unpack_tensor(const msgpack::object& o, Tensor* out, const std::string& what = "tensor");

template <class Tag>
void pack_id(Packer& pk, const Id<Tag>& id) {
  pack_id_bytes(pk, id.bytes());
}
template <class Tag>
Status unpack_id(const msgpack::object& o, Id<Tag>* out, const std::string& what = std::string(Tag::name) + " id") {
  std::array<uint8_t, 16> bytes;
  TROUPE_RETURN_IF_ERROR(unpack_id_bytes(o, &bytes, what));
  *out = Id<Tag>::from_bytes(bytes);
  return {};
}

// ---- whole records: msgpack bytes, starting with the schema version ----

// Parses `bytes` as exactly one msgpack value (nothing may follow it), with size limits derived
// from the input length so that hostile headers cannot force huge allocations. Bin and str
// payloads of the returned object point into `bytes`, which must outlive the handle.
// Errors: corrupt_data prefixed with `what`.
Status parse_msgpack(std::string_view bytes, msgpack::object_handle* out, const std::string& what);

// Checks that `o` is the array [version, payload] with version == kCodecSchemaVersion and points
// `*payload` at the payload. version_mismatch names both versions; other faults are corrupt_data.
Status open_record(const msgpack::object& o, const msgpack::object** payload, const std::string& what);

std::string encode_status(const Status& status);
// Returns the decoding error; on success stores the decoded Status (which may itself be an error
// status) in `*out`. (Expected<Status> cannot tell the two apart.)
Status decode_status(std::string_view bytes, Status* out);

template <class Tag>
std::string encode_id(const Id<Tag>& id);
template <class Tag>
Expected<Id<Tag>> decode_id(std::string_view bytes);

std::string encode_dtype(DType dtype);
Expected<DType> decode_dtype(std::string_view bytes);
std::string encode_device(Device device);
Expected<Device> decode_device(std::string_view bytes);
std::string encode_shape(const Shape& shape);
Expected<Shape> decode_shape(std::string_view bytes);
// Fails like pack_tensor (a device tensor that cannot be copied to the host).
Expected<std::string> encode_tensor(const Tensor& tensor);
Expected<Tensor> decode_tensor(std::string_view bytes);

// ---- template definitions ----

namespace detail {
// Starts a standalone record: the array header and the schema version.
void begin_record(Packer& pk);
inline std::string to_string(const msgpack::sbuffer& buf) { return std::string(buf.data(), buf.size()); }
}  // namespace detail

template <class Tag>
std::string encode_id(const Id<Tag>& id) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  detail::begin_record(pk);
  pack_id(pk, id);
  return detail::to_string(buf);
}

template <class Tag>
Expected<Id<Tag>> decode_id(std::string_view bytes) {
  const std::string what = std::string(Tag::name) + " id record";
  msgpack::object_handle h;
  TROUPE_RETURN_IF_ERROR(parse_msgpack(bytes, &h, what));
  const msgpack::object* payload = nullptr;
  TROUPE_RETURN_IF_ERROR(open_record(h.get(), &payload, what));
  Id<Tag> id;
  TROUPE_RETURN_IF_ERROR(unpack_id(*payload, &id, what));
  return id;
}

}  // namespace troupe
