// .npy and .npz files written by NumPy read back exactly (data/readers/npy_reader.h, npz_reader.h):
// every supported dtype, the three header versions, big-endian data, 0-d and empty arrays, stored
// and deflated archives; and every malformed file refused naming it.
#include <catch2/catch.hpp>

#include <cmath>

#include "data/readers/npy_reader.h"
#include "data/readers/npz_reader.h"
#include "tests/data/numpy_fixture.h"

namespace troupe::data {
namespace {

using troupe::testing::read_bytes;
using troupe::testing::run_numpy;
using troupe::testing::TempDir;
using troupe::testing::write_text;

// The value NumPy wrote at flat index i: (i * 37) % 251 - 100 for signed types ((i * 37) % 251 % 200
// - 100 for i1), (i * 37) % 251 for unsigned ones, and (... - 100) / 8 for floats (exact in f16 too).
double expected(ElemType t, size_t i) {
  const double base = static_cast<double>((i * 37) % 251);
  switch (t) {
    case ElemType::u8: case ElemType::u16: case ElemType::u32: return base;
    case ElemType::i8: return static_cast<double>((i * 37) % 251 % 200) - 100;  // fits in i1
    case ElemType::i16: case ElemType::i32: case ElemType::i64: return base - 100;
    default: return (base - 100) / 8;
  }
}

const char* kMake = R"(
def values(dtype, shape):
    n = int(np.prod(shape))
    base = (np.arange(n) * 37) % 251
    if np.dtype(dtype).kind == 'u': v = base
    elif np.dtype(dtype).itemsize == 1: v = base % 200 - 100
    elif np.dtype(dtype).kind == 'i': v = base - 100
    else: v = (base - 100) / 8
    return v.astype(dtype).reshape(shape)
)";

TEST_CASE("npy: every dtype in every header version reads back exactly", "[data][npy]") {
  TempDir dir;
  const std::pair<const char*, ElemType> types[] = {
      {"u1", ElemType::u8},  {"i1", ElemType::i8},   {"u2", ElemType::u16}, {"i2", ElemType::i16},
      {"u4", ElemType::u32}, {"i4", ElemType::i32},  {"i8", ElemType::i64}, {"f2", ElemType::f16},
      {"f4", ElemType::f32}, {"f8", ElemType::f64}};
  std::string code = kMake;
  for (const auto& [np_type, _] : types)
    for (int v = 1; v <= 3; ++v)
      code += "np.lib.format.write_array(open('" + std::string(np_type) + "_v" + std::to_string(v) +
              ".npy', 'wb'), values('<" + np_type + "', (5, 3, 4)), version=(" + std::to_string(v) + ", 0))\n";
  code += "np.save('be_i4.npy', values('>i4', (7,)))\nnp.save('be_f8.npy', values('>f8', (2, 3)))\n";
  code += "np.save('bool.npy', np.array([True, False, True]))\n";
  run_numpy(dir.path(), code);
  for (const auto& [np_type, type] : types) {
    for (int v = 1; v <= 3; ++v) {
      const std::string path = dir.file(std::string(np_type) + "_v" + std::to_string(v) + ".npy");
      CAPTURE(path);
      auto a = read_npy(path);
      INFO(a.status().to_string());
      REQUIRE(a.ok());
      CHECK(a->type == type);
      CHECK(a->shape == std::vector<int64_t>{5, 3, 4});
      size_t wrong = 0;
      for (size_t i = 0; i < 60; ++i) wrong += a->value(i) != expected(type, i);
      CHECK(wrong == 0);
      CHECK(a->count() == 5);
      CHECK(a->example_shape() == std::vector<int64_t>{3, 4});
    }
  }
  auto be = read_npy(dir.file("be_i4.npy"));
  REQUIRE(be.ok());
  for (size_t i = 0; i < 7; ++i) CHECK(be->value(i) == expected(ElemType::i32, i));
  auto be8 = read_npy(dir.file("be_f8.npy"));
  REQUIRE(be8.ok());
  for (size_t i = 0; i < 6; ++i) CHECK(be8->value(i) == expected(ElemType::f64, i));
  auto b = read_npy(dir.file("bool.npy"));
  REQUIRE(b.ok());
  CHECK(b->type == ElemType::u8);
  CHECK(b->value(0) == 1);
  CHECK(b->value(1) == 0);
}

TEST_CASE("npy: 0-d and empty arrays", "[data][npy]") {
  TempDir dir;
  run_numpy(dir.path(), "np.save('scalar.npy', np.float32(3.5))\nnp.save('empty.npy', np.zeros((0,), 'f4'))\n"
                        "np.save('empty2.npy', np.zeros((0, 3), 'i2'))\n");
  auto s = read_npy(dir.file("scalar.npy"));
  REQUIRE(s.ok());
  CHECK(s->shape.empty());
  CHECK(s->elements() == 1);
  CHECK(s->value(0) == 3.5);
  auto e = read_npy(dir.file("empty.npy"));
  REQUIRE(e.ok());
  CHECK(e->shape == std::vector<int64_t>{0});
  CHECK(e->elements() == 0);
  auto e2 = read_npy(dir.file("empty2.npy"));
  REQUIRE(e2.ok());
  CHECK(e2->shape == std::vector<int64_t>{0, 3});
  CHECK(e2->type == ElemType::i16);
}

TEST_CASE("npz: stored and deflated archives (NumPy writes ZIP64 entries) read back exactly", "[data][npz]") {
  TempDir dir;
  run_numpy(dir.path(), std::string(kMake) +
                            "np.savez('stored.npz', image=values('u1', (4, 2, 2)), label=values('i8', (4,)))\n"
                            "np.savez_compressed('deflated.npz', image=values('u1', (4, 2, 2)), label=values('i8', (4,)))\n");
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    CAPTURE(name);
    auto members = read_npz(dir.file(name));
    INFO(members.status().to_string());
    REQUIRE(members.ok());
    REQUIRE(members->size() == 2);
    CHECK((*members)[0].first == "image");
    CHECK((*members)[1].first == "label");
    const Array& image = (*members)[0].second;
    CHECK(image.shape == std::vector<int64_t>{4, 2, 2});
    for (size_t i = 0; i < 16; ++i) CHECK(image.value(i) == expected(ElemType::u8, i));
    const Array& label = (*members)[1].second;
    CHECK(label.type == ElemType::i64);
    for (size_t i = 0; i < 4; ++i) CHECK(label.value(i) == expected(ElemType::i64, i));
  }
}

TEST_CASE("npy: malformed files are refused naming the file and what is wrong", "[data][npy][errors]") {
  TempDir dir;
  run_numpy(dir.path(), "np.save('good.npy', np.arange(12, dtype='f4').reshape(3, 4))\n"
                        "np.save('fortran.npy', np.asfortranarray(np.arange(12, dtype='f4').reshape(3, 4)))\n"
                        "np.save('complex.npy', np.zeros(3, 'c8'))\n"
                        "np.save('strings.npy', np.array(['ab', 'cd']))\n"
                        "np.save('u64.npy', np.zeros(3, 'u8'))\n"
                        "np.save('structured.npy', np.zeros(2, dtype=[('a', 'f4'), ('b', 'i4')]))\n");
  const std::string good = read_bytes(dir.file("good.npy"));
  write_text(dir.file("short_header.npy"), good.substr(0, 40));
  write_text(dir.file("short_data.npy"), good.substr(0, good.size() - 5));
  write_text(dir.file("trailing.npy"), good + "xyz");
  std::string garbled = good;
  garbled.replace(garbled.find("'shape'"), 7, "'shqpe'");
  write_text(dir.file("garbled.npy"), garbled);
  std::string bad_tuple = good;
  bad_tuple.replace(bad_tuple.find("(3, 4)"), 6, "(3, x)");
  write_text(dir.file("bad_tuple.npy"), bad_tuple);
  write_text(dir.file("not_npy.npy"), "hello, world");
  std::string huge = good;  // (3, 4) -> a shape whose byte count wraps a 64-bit size
  huge.replace(huge.find("(3, 4)"), 6, "(1073741824, 2147483648)");
  write_text(dir.file("huge.npy"), huge.substr(0, huge.find('\n') + 1));
  struct Case {
    const char* file;
    Code code;
    const char* says;
  };
  const Case cases[] = {{"short_header.npy", Code::corrupt_data, "truncated .npy header"},
                        {"short_data.npy", Code::corrupt_data, "truncated"},
                        {"trailing.npy", Code::corrupt_data, "bytes after the data"},
                        {"garbled.npy", Code::corrupt_data, "needs 'descr'"},
                        {"bad_tuple.npy", Code::corrupt_data, "garbled .npy header"},
                        {"not_npy.npy", Code::corrupt_data, "not a .npy file"},
                        {"huge.npy", Code::corrupt_data, "overflows"},
                        {"fortran.npy", Code::invalid_argument, "fortran_order"},
                        {"complex.npy", Code::invalid_argument, "(complex) is not supported"},
                        {"strings.npy", Code::invalid_argument, "(strings) is not supported"},
                        {"u64.npy", Code::invalid_argument, "unsigned 64-bit"},
                        {"structured.npy", Code::invalid_argument, "structured dtype"},
                        {"missing.npy", Code::not_found, "no such file"}};
  for (const Case& c : cases) {
    CAPTURE(c.file);
    auto a = read_npy(dir.file(c.file));
    REQUIRE_FALSE(a.ok());
    INFO(a.status().to_string());
    CHECK(a.status().code() == c.code);
    CHECK(a.status().message().find(c.says) != std::string::npos);
    CHECK(a.status().message().find(dir.file(c.file)) != std::string::npos);
  }
  // An archive with a damaged member, a flipped byte in a stored member (its CRC), and one that is
  // not an archive at all.
  run_numpy(dir.path(), "np.savez('two.npz', a=np.zeros(1000, 'f4'), b=np.ones(3, 'i4'))\n");
  std::string zip = read_bytes(dir.file("two.npz"));
  write_text(dir.file("cut.npz"), zip.substr(0, zip.size() / 2));
  write_text(dir.file("text.npz"), "not a zip");
  std::string flipped = zip;
  flipped[flipped.find(std::string(16, '\0')) + 8] = 1;  // inside a's zeros
  write_text(dir.file("flipped.npz"), flipped);
  for (const char* f : {"cut.npz", "text.npz", "flipped.npz"}) {
    CAPTURE(f);
    auto m = read_npz(dir.file(f));
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == Code::corrupt_data);
    CHECK(m.status().message().find(dir.file(f)) != std::string::npos);
  }
}

}  // namespace
}  // namespace troupe::data
