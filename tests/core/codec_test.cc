// msgpack codecs: round trips of every core type, embedding inside larger records, and refusal of
// truncated, garbage, mistyped and other-version input without crashing or throwing.
#include "core/codec.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>

namespace troupe {
namespace {

// Raw msgpack bytes written by `fn`, for hand-made (often malformed) records.
template <class Fn>
std::string raw(Fn&& fn) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  fn(pk);
  return std::string(buf.data(), buf.size());
}

Tensor iota_tensor(DType dtype, Shape shape) {
  Tensor t = Tensor::host(dtype, std::move(shape));
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  return t;
}

void check_same_tensor(const Tensor& a, const Tensor& b) {
  CHECK(a.dtype() == b.dtype());
  CHECK(a.shape() == b.shape());
  CHECK(b.device().is_cpu());
  CHECK(b.owns_storage());
  REQUIRE(a.nbytes() == b.nbytes());
  if (a.nbytes()) CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

Tensor round_trip(const Tensor& t) {
  auto bytes = encode_tensor(t);
  REQUIRE(bytes.ok());
  auto back = decode_tensor(*bytes);
  REQUIRE(back.ok());
  return *back;
}

}  // namespace

TEST_CASE("codec: status round trips for every code", "[core][codec]") {
  for (int c = 0; c <= static_cast<int>(Code::internal); ++c) {
    Status s(static_cast<Code>(c), c == 0 ? "" : "failure \xc3\xa9 number " + std::to_string(c));
    Status back(Code::internal, "sentinel");
    REQUIRE(decode_status(encode_status(s), &back).ok());
    CHECK(back.code() == s.code());
    CHECK(back.message() == s.message());
  }
}

TEST_CASE("codec: ids round trip as 16 bytes", "[core][codec]") {
  JobId id = JobId::random();
  auto back = decode_id<JobTag>(encode_id(id));
  REQUIRE(back.ok());
  CHECK(*back == id);
  auto nil = decode_id<NodeTag>(encode_id(NodeId()));
  REQUIRE(nil.ok());
  CHECK(nil->nil());
  // The payload is a bin of exactly 16 bytes: [version, bin16] = 1 + 1 + 2 + 16 bytes.
  CHECK(encode_id(id).size() == 20);
}

TEST_CASE("codec: dtypes, devices and shapes round trip", "[core][codec]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    auto back = decode_dtype(encode_dtype(t));
    REQUIRE(back.ok());
    CHECK(*back == t);
  }
  for (Device d : {Device::cpu(), Device::cuda(0), Device::cuda(7)}) {
    auto back = decode_device(encode_device(d));
    REQUIRE(back.ok());
    CHECK(*back == d);
    CHECK(back->to_string() == d.to_string());
  }
  for (const Shape& s : {Shape{}, Shape{0}, Shape{3, 4, 5}, Shape{int64_t{1} << 40, 1}}) {
    auto back = decode_shape(encode_shape(s));
    REQUIRE(back.ok());
    CHECK(*back == s);
  }
}

TEST_CASE("codec: tensors round trip bit for bit", "[core][codec]") {
  SECTION("f32 matrix") { check_same_tensor(iota_tensor(DType::f32, {3, 5}), round_trip(iota_tensor(DType::f32, {3, 5}))); }
  SECTION("default (empty) tensor") { check_same_tensor(Tensor(), round_trip(Tensor())); }
  SECTION("zero rows") { check_same_tensor(Tensor::host(DType::f32, {0, 7}), round_trip(Tensor::host(DType::f32, {0, 7}))); }
  SECTION("scalar") { check_same_tensor(iota_tensor(DType::f32, {}), round_trip(iota_tensor(DType::f32, {}))); }
  SECTION("f16 and bf16 keep their bit patterns, NaN and infinity included") {
    for (DType t : {DType::f16, DType::bf16}) {
      Tensor x = Tensor::host(t, {4});
      auto* h = x.data_as<uint16_t>();
      h[0] = t == DType::f16 ? f32_to_f16(1.5f) : f32_to_bf16(1.5f);
      h[1] = t == DType::f16 ? 0x7c00 : 0x7f80;  // +inf
      h[2] = t == DType::f16 ? 0x7e01 : 0x7fc1;  // NaN with payload
      h[3] = 0x8001;                             // negative subnormal
      Tensor y = round_trip(x);
      check_same_tensor(x, y);
    }
  }
  SECTION("large tensor (16 MiB)") {
    Tensor big = iota_tensor(DType::f32, {1024, 4096});
    check_same_tensor(big, round_trip(big));
  }
  SECTION("a slice encodes only its rows") {
    Tensor x = iota_tensor(DType::bf16, {6, 3});
    auto rows = x.slice(2, 4);
    REQUIRE(rows.ok());
    Tensor y = round_trip(*rows);
    CHECK(y.shape() == Shape{2, 3});
    CHECK(std::memcmp(y.data(), static_cast<const char*>(x.data()) + 2 * 3 * 2, 12) == 0);
  }
}

TEST_CASE("codec: device tensors are copied to the host or refused", "[core][codec]") {
  std::string why;
  if (cuda_device_count(&why) == 0) {
    float fake[2] = {1, 2};  // never dereferenced: without CUDA the copy is refused first
    Tensor dev = Tensor::view(fake, DType::f32, {2}, Device::cuda(0));
    auto bytes = encode_tensor(dev);
    REQUIRE_FALSE(bytes.ok());
    CHECK(bytes.status().code() == Code::unavailable);
    CHECK_THAT(bytes.status().message(), Catch::Contains("cuda:0"));
    msgpack::sbuffer buf;
    Packer pk(buf);
    CHECK_FALSE(pack_tensor(pk, dev).ok());
    CHECK(buf.size() == 0);  // nothing written on error
  } else {
    Tensor host = iota_tensor(DType::f32, {8, 3});
    auto dev = host.to(Device::cuda(0));
    REQUIRE(dev.ok());
    Tensor back = round_trip(*dev);
    check_same_tensor(host, back);
  }
}

TEST_CASE("codec: a tensor with elements but no storage is refused", "[core][codec]") {
  Tensor bad = Tensor::view(nullptr, DType::f32, {4});
  auto bytes = encode_tensor(bad);
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.status().code() == Code::invalid_argument);
}

TEST_CASE("codec: values embed in larger records", "[core][codec]") {
  JobId job = JobId::random();
  Tensor w = iota_tensor(DType::f16, {2, 2});
  std::string bytes = raw([&](Packer& pk) {
    pk.pack_array(6);
    pk.pack_uint32(42);  // the enclosing record's own schema version
    pack_id(pk, job);
    REQUIRE(pack_tensor(pk, w).ok());
    pack_status(pk, not_found("no such shard"));
    pack_device(pk, Device::cuda(1));
    pack_shape(pk, {9, 8});
  });
  msgpack::object_handle h;
  REQUIRE(parse_msgpack(bytes, &h, "job record").ok());
  const msgpack::object& o = h.get();
  REQUIRE(o.type == msgpack::type::ARRAY);
  REQUIRE(o.via.array.size == 6);
  JobId job2;
  Tensor w2;
  Status s2;
  Device d2;
  Shape sh2;
  REQUIRE(unpack_id(o.via.array.ptr[1], &job2).ok());
  REQUIRE(unpack_tensor(o.via.array.ptr[2], &w2).ok());
  REQUIRE(unpack_status(o.via.array.ptr[3], &s2).ok());
  REQUIRE(unpack_device(o.via.array.ptr[4], &d2).ok());
  REQUIRE(unpack_shape(o.via.array.ptr[5], &sh2).ok());
  CHECK(job2 == job);
  check_same_tensor(w, w2);
  CHECK(s2.code() == Code::not_found);
  CHECK(s2.message() == "no such shard");
  CHECK(d2 == Device::cuda(1));
  CHECK(sh2 == Shape{9, 8});

  // A misplaced field is corrupt_data naming the caller's description, and leaves the output alone.
  Status st = unpack_id(o.via.array.ptr[2], &job2, "job record: field 'job'");
  CHECK(st.code() == Code::corrupt_data);
  CHECK_THAT(st.message(), Catch::StartsWith("job record: field 'job'"));
  CHECK(job2 == job);
}

TEST_CASE("codec: another schema version is version_mismatch naming both", "[core][codec]") {
  std::string bytes = raw([](Packer& pk) {
    pk.pack_array(2);
    pk.pack_uint32(kCodecSchemaVersion + 1);
    pack_shape(pk, {1, 2});
  });
  auto s = decode_shape(bytes);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == Code::version_mismatch);
  CHECK_THAT(s.status().message(), Catch::Contains("version " + std::to_string(kCodecSchemaVersion + 1)));
  CHECK_THAT(s.status().message(), Catch::Contains("version " + std::to_string(kCodecSchemaVersion)));

  Status out;
  Status st = decode_status(raw([](Packer& pk) {
                              pk.pack_array(3);  // a future layout with more fields
                              pk.pack_uint32(7);
                              pk.pack_nil();
                              pk.pack_nil();
                            }),
                            &out);
  CHECK(st.code() == Code::version_mismatch);
  CHECK_THAT(st.message(), Catch::Contains("version 7"));
}

TEST_CASE("codec: every truncation of a record is corrupt_data", "[core][codec]") {
  auto full = encode_tensor(iota_tensor(DType::f32, {2, 3}));
  REQUIRE(full.ok());
  for (size_t n = 0; n < full->size(); ++n) {
    auto t = decode_tensor(std::string_view(full->data(), n));
    INFO("prefix of " << n << " bytes");
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == Code::corrupt_data);
  }
  auto trailing = decode_tensor(*full + "x");
  REQUIRE_FALSE(trailing.ok());
  CHECK(trailing.status().code() == Code::corrupt_data);
  CHECK_THAT(trailing.status().message(), Catch::Contains("trailing"));
}

TEST_CASE("codec: malformed records are corrupt_data with a reason", "[core][codec]") {
  auto v = [](Packer& pk) {
    pk.pack_array(2);
    pk.pack_uint32(kCodecSchemaVersion);
  };
  struct Case {
    const char* name;
    std::string bytes;
    const char* reason;
  };
  std::vector<Case> cases = {
      {"not an array", raw([](Packer& pk) { pk.pack_str(2); pk.pack_str_body("hi", 2); }), "expected an array"},
      {"version not an integer", raw([](Packer& pk) { pk.pack_array(2); pk.pack_nil(); pk.pack_nil(); }), "schema version"},
      {"payload of wrong type", raw([&](Packer& pk) { v(pk); pk.pack_true(); }), "found bool"},
      {"wrong array length", raw([&](Packer& pk) { v(pk); pk.pack_array(2); pack_dtype(pk, DType::f32); pack_shape(pk, {1}); }), "array of 3"},
      {"unknown dtype", raw([&](Packer& pk) { v(pk); pk.pack_array(3); pk.pack_uint8(9); pack_shape(pk, {0}); pk.pack_bin(0); }), "out of range"},
      {"negative dimension", raw([&](Packer& pk) { v(pk); pk.pack_array(3); pack_dtype(pk, DType::f32); pack_shape(pk, {-1}); pk.pack_bin(0); }), "dimension 0"},
      {"bytes do not match shape", raw([&](Packer& pk) { v(pk); pk.pack_array(3); pack_dtype(pk, DType::f32); pack_shape(pk, {2, 2}); pk.pack_bin(15); pk.pack_bin_body(std::string(15, 'a').data(), 15); }), "do not match shape [2, 2]"},
      {"shape whose size overflows", raw([&](Packer& pk) { v(pk); pk.pack_array(3); pack_dtype(pk, DType::f32); pack_shape(pk, {int64_t{1} << 62, int64_t{1} << 62}); pk.pack_bin(0); }), "overflows"},
      {"data is a string, not bin", raw([&](Packer& pk) { v(pk); pk.pack_array(3); pack_dtype(pk, DType::f32); pack_shape(pk, {1}); pk.pack_str(4); pk.pack_str_body("abcd", 4); }), "binary"},
      {"extra element after the payload", raw([&](Packer& pk) { pk.pack_array(3); pk.pack_uint32(kCodecSchemaVersion); pk.pack_nil(); pk.pack_nil(); }), "array of 3"},
      {"array header claiming 4 billion elements", std::string("\xdd\xff\xff\xff\xff\x01", 6), "malformed"},
      {"bin header claiming 4 GiB", std::string("\x92\x01\x93\x00\x91\x01\xc6\xff\xff\xff\xff", 11), "truncated"},
      {"reserved byte 0xc1", std::string("\x92\x01\xc1", 3), "malformed"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto t = decode_tensor(c.bytes);
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == Code::corrupt_data);
    CHECK_THAT(t.status().message(), Catch::Contains(c.reason));
    CHECK_THAT(t.status().message(), Catch::StartsWith("tensor record"));
  }

  SECTION("other types") {
    CHECK(decode_id<JobTag>(raw([&](Packer& pk) { v(pk); pk.pack_bin(15); pk.pack_bin_body("0123456789abcde", 15); })).status().code() == Code::corrupt_data);
    CHECK(decode_device(raw([&](Packer& pk) { v(pk); pk.pack_array(2); pk.pack_uint8(2); pk.pack_uint8(0); })).status().code() == Code::corrupt_data);
    CHECK(decode_device(raw([&](Packer& pk) { v(pk); pk.pack_array(2); pk.pack_uint8(1); pk.pack_int8(-1); })).status().code() == Code::corrupt_data);
    CHECK(decode_dtype(raw([&](Packer& pk) { v(pk); pk.pack_int8(-1); })).status().code() == Code::corrupt_data);
    Status out = not_found("unchanged");
    Status st = decode_status(raw([&](Packer& pk) { v(pk); pk.pack_array(2); pk.pack_uint8(99); pk.pack_str(0); }), &out);
    CHECK(st.code() == Code::corrupt_data);
    CHECK(out.code() == Code::not_found);  // left unchanged on error
    CHECK(decode_shape("").status().code() == Code::corrupt_data);
  }
}

TEST_CASE("codec: random garbage never crashes or throws", "[core][codec]") {
  std::mt19937 gen(12345);
  auto valid = encode_tensor(iota_tensor(DType::f32, {4, 4}));
  REQUIRE(valid.ok());
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes;
    if (iter % 2 == 0) {  // pure noise
      bytes.resize(gen() % 64);
      for (char& c : bytes) c = static_cast<char>(gen());
    } else {  // a valid record with a few bytes flipped
      bytes = *valid;
      for (int k = 0; k < 3; ++k) bytes[gen() % bytes.size()] = static_cast<char>(gen());
    }
    Expected<Tensor> t = Tensor();
    REQUIRE_NOTHROW(t = decode_tensor(bytes));
    if (!t.ok()) {
      CHECK((t.status().code() == Code::corrupt_data || t.status().code() == Code::version_mismatch));
    } else {
      CHECK(t->nbytes() == t->numel() * dtype_size(t->dtype()));
    }
  }
}

}  // namespace troupe
