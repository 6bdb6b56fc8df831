// The safetensors format (data/safetensors.h): files troupe writes read back exactly and are read by
// a NumPy reader of the format (no troupe code); every malformed file is refused naming what is
// wrong, before any tensor is handed out; the piecewise writer makes the same file from pieces in any
// order and leaves nothing at its path unless every byte was written.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>

#include "data/safetensors.h"
#include "data/safetensors_writer.h"
#include "tests/data/numpy_fixture.h"

namespace troupe::data {
namespace {

using troupe::testing::read_bytes;
using troupe::testing::run_numpy;
using troupe::testing::TempDir;
using troupe::testing::write_text;

NamedTensor f32_tensor(const std::string& name, std::vector<int64_t> shape, float first) {
  NamedTensor t;
  t.name = name;
  t.dtype = "F32";
  t.shape = std::move(shape);
  const int64_t n = shape_product(t.shape);
  t.bytes.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = first + static_cast<float>(i) * 0.5f;
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  return t;
}

// A file of the given header text and data bytes.
std::string file_of(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x01');
}

TEST_CASE("safetensors: written files read back exactly and NumPy reads them without troupe", "[data][safetensors]") {
  TempDir dir;
  TensorFile f;
  f.tensors = {f32_tensor("w", {3, 2}, 1.0f), f32_tensor("b", {2}, -1.0f), f32_tensor("a.scale", {}, 7.0f)};
  f.metadata = {{"troupe.trainer", "mlp"}, {"note", "hello"}};
  REQUIRE(write_safetensors(dir.file("m.safetensors"), f).ok());
  const std::string raw = read_bytes(dir.file("m.safetensors"));
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(raw[i]);
  CHECK(len % 8 == 0);
  auto back = read_safetensors(dir.file("m.safetensors"));
  INFO(back.status().to_string());
  REQUIRE(back.ok());
  REQUIRE(back->tensors.size() == 3);
  CHECK(back->tensors[0].name == "a.scale");  // name order
  CHECK(back->tensors[0].shape.empty());
  CHECK(back->find("w")->bytes == f.tensors[0].bytes);
  CHECK(back->find("b")->shape == std::vector<int64_t>{2});
  CHECK(back->metadata == f.metadata);
  auto values = tensor_as_f32(*back->find("w"), "w");
  REQUIRE(values.ok());
  CHECK((*values)[5] == 3.5f);

  run_numpy(dir.path(), R"PY(
import json, struct
raw = open('m.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
def get(name):
    t = h[name]; b, e = t['data_offsets']
    return np.frombuffer(data[b:e], dtype='<f4').reshape(t['shape'])
assert h['__metadata__'] == {'troupe.trainer': 'mlp', 'note': 'hello'}, h
assert get('w').tolist() == [[1.0, 1.5], [2.0, 2.5], [3.0, 3.5]], get('w')
assert get('b').tolist() == [-1.0, -0.5]
assert float(get('a.scale')) == 7.0
)PY");
}

TEST_CASE("safetensors writer: pieces in any order make write_safetensors' file, and nothing lands unfinished",
          "[data][safetensors]") {
  TempDir dir;
  TensorFile f;
  f.tensors = {f32_tensor("w", {3, 2}, 1.0f), f32_tensor("b", {2}, -1.0f), f32_tensor("a.scale", {}, 7.0f)};
  f.metadata = {{"troupe.trainer", "mlp"}};
  REQUIRE(write_safetensors(dir.file("whole.safetensors"), f).ok());
  std::vector<TensorSpec> specs;
  for (const NamedTensor& t : f.tensors) specs.push_back({t.name, t.dtype, t.shape});

  const std::string path = dir.file("pieces.safetensors");
  auto w = SafetensorsWriter::create(path, specs, f.metadata);
  INFO(w.status().to_string());
  REQUIRE(w.ok());
  CHECK((*w)->element_size(0) == 4);
  // Tensor w's second half, then b, then w's first half, then the scalar.
  REQUIRE((*w)->write(0, 12, f.tensors[0].bytes.data() + 12, 12).ok());
  REQUIRE((*w)->write(1, 0, f.tensors[1].bytes.data(), 8).ok());
  REQUIRE((*w)->write(0, 0, f.tensors[0].bytes.data(), 12).ok());
  const Status outside = (*w)->write(1, 4, f.tensors[1].bytes.data(), 8);  // past b's 8 bytes
  CHECK(outside.code() == Code::invalid_argument);
  CHECK_FALSE(std::filesystem::exists(path));  // nothing at the path before commit
  const Status early = SafetensorsWriter::create(dir.file("early.safetensors"), specs, {}).value()->commit();
  CHECK(early.code() == Code::internal);  // no tensor data written
  CHECK_THAT(early.message(), Catch::Contains("0 of 36 bytes"));
  CHECK_FALSE(std::filesystem::exists(dir.file("early.safetensors")));
  REQUIRE((*w)->write(2, 0, f.tensors[2].bytes.data(), 4).ok());
  REQUIRE((*w)->commit().ok());
  CHECK(read_bytes(path) == read_bytes(dir.file("whole.safetensors")));

  {  // abandoned half-way: no file, no temporary left behind
    auto dropped = SafetensorsWriter::create(dir.file("dropped.safetensors"), specs, {});
    REQUIRE(dropped.ok());
    REQUIRE((*dropped)->write(1, 0, f.tensors[1].bytes.data(), 8).ok());
  }
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    INFO(e.path().string());
    CHECK(e.path().string().find(".tmp.") == std::string::npos);
    ++files;
  }
  CHECK(files == 2);  // whole and pieces
  auto bad = SafetensorsWriter::create(dir.file("bad.safetensors"), {{"x", "F24", {2}}}, {});
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK_THAT(bad.status().message(), Catch::Contains("tensor 'x' has unknown dtype 'F24'"));
}

TEST_CASE("safetensors: malformed files are refused naming what is wrong", "[data][safetensors][errors]") {
  TempDir dir;
  struct Case {
    std::string name, bytes;
    const char* says;
  };
  const std::string t1 = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::string huge(8, '\0');
  huge[3] = 0x10;  // 268 MB of header announced
  std::string past(8, '\0');
  past[0] = 100;
  const Case cases[] = {
      {"short", "abc", "truncated"},
      {"past", past + "{}", "runs past the end of the file"},
      {"huge", huge + "{}", "over the 100 MB limit"},
      {"json", file_of("{not json", 0), "not a JSON object"},
      {"dtype", file_of(R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2), "unknown dtype 'F8'"},
      {"count", file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12 bytes"},
      {"overlap", file_of("{" + t1 + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "overlaps"},
      {"gap", file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "a gap of 4 bytes"},
      {"backwards", file_of(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), "run backwards"},
      {"truncated", file_of("{" + t1 + "}", 4), "(truncated)"},
      {"metadata", file_of(R"({"__metadata__":{"step":3}})", 0), "is not a string"},
      {"fields", file_of(R"({"a":{"dtype":"F32"}})", 0), "needs dtype"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    write_text(dir.file(c.name), c.bytes);
    auto f = read_safetensors(dir.file(c.name));
    REQUIRE_FALSE(f.ok());
    INFO(f.status().to_string());
    CHECK(f.status().code() == Code::corrupt_data);
    CHECK(f.status().message().find(c.says) != std::string::npos);
    CHECK(f.status().message().find(dir.file(c.name)) != std::string::npos);
  }
  TensorFile bad;
  bad.tensors = {f32_tensor("x", {2}, 0)};
  bad.tensors[0].bytes.pop_back();
  CHECK(write_safetensors(dir.file("w"), bad).code() == Code::invalid_argument);
}

}  // namespace
}  // namespace troupe::data
