// What --data SPEC names (data/dataset_spec.h): splits from file and array names, directories,
// globs, comma lists and dataset.yaml, IDX files, token streams; and the errors users meet.
#include <catch2/catch.hpp>

#include "data/dataset_spec.h"
#include "data/readers/idx_reader.h"
#include "tests/data/numpy_fixture.h"

namespace troupe::data {
namespace {

using troupe::testing::run_numpy;
using troupe::testing::TempDir;
using troupe::testing::write_text;

TEST_CASE("dataset spec: split names in file and array names", "[data][spec]") {
  CHECK(split_of("x_train").split == "train");
  CHECK(split_of("x_train").rest == "x");
  CHECK(split_of("t10k-images").split == "test");
  CHECK(split_of("t10k-images").rest == "images");
  CHECK(split_of("train").rest.empty());
  CHECK(split_of("y_valid").split == "val");
  CHECK(split_of("training_data").split.empty());  // a whole word only
  CHECK(split_of("features").rest == "features");
}

TEST_CASE("dataset spec: Keras-style .npy files, a directory, a glob, an .npz and a yaml agree", "[data][spec]") {
  TempDir dir;
  run_numpy(dir.path(), "x = np.arange(24, dtype='u1').reshape(6, 2, 2); y = np.arange(6) % 3\n"
                        "os.mkdir('d'); np.save('d/x_train.npy', x[:4]); np.save('d/y_train.npy', y[:4])\n"
                        "np.save('d/x_test.npy', x[4:]); np.save('d/y_test.npy', y[4:])\n"
                        "np.savez('all.npz', x_train=x[:4], y_train=y[:4], x_test=x[4:], y_test=y[4:])\n"
                        "open('mine.yaml', 'w').write('splits:\\n  train: [d/x_train.npy, d/y_train.npy]\\n"
                        "  val: [d/x_test.npy, d/y_test.npy]\\nfields:\\n  x: image\\n  y: label\\n')\n");
  for (const std::string& spec : std::vector<std::string>{dir.file("d"), dir.file("d/*.npy"), dir.file("all.npz"),
                                 dir.file("d/x_train.npy") + "," + dir.file("d/y_train.npy") + "," +
                                     dir.file("d/x_test.npy") + "," + dir.file("d/y_test.npy")}) {
    CAPTURE(spec);
    auto d = open_dataset(spec);
    INFO(d.status().to_string());
    REQUIRE(d.ok());
    REQUIRE(d->splits.count("train"));
    REQUIRE(d->splits.count("test"));
    const Table& train = d->splits.at("train");
    CHECK(train.count() == 4);
    REQUIRE(train.find("x"));
    REQUIRE(train.find("y"));
    CHECK(train.find("x")->array.example_shape() == std::vector<int64_t>{2, 2});
    CHECK(d->splits.at("test").count() == 2);
  }
  auto y = open_dataset(dir.file("mine.yaml"));
  INFO(y.status().to_string());
  REQUIRE(y.ok());
  REQUIRE(y->splits.count("val"));
  CHECK(y->splits.at("train").find("image"));
  CHECK(y->splits.at("val").find("label"));
  CHECK(y->splits.at("val").count() == 2);
}

TEST_CASE("dataset spec: IDX files (gzip or not) and raw token streams", "[data][spec][idx]") {
  auto d = open_dataset(TROUPE_DEFAULT_DATASET_DIR);
  INFO(d.status().to_string());
  REQUIRE(d.ok());
  CHECK(d->splits.at("train").count() == 60000);
  CHECK(d->splits.at("test").count() == 10000);
  CHECK(d->splits.at("train").find("image")->array.example_shape() == std::vector<int64_t>{28, 28});
  CHECK(d->splits.at("train").find("label")->array.type == ElemType::u8);

  TempDir dir;
  // An uncompressed IDX of i16 (big-endian), and nanoGPT-style token files.
  write_text(dir.file("w-idx2-ubyte"), std::string("\0\0\x0b\x02\0\0\0\x02\0\0\0\x02\x01\x00\xff\xfe\0\x05\x80\x00", 20));
  auto w = read_idx(dir.file("w-idx2-ubyte"));
  INFO(w.status().to_string());
  REQUIRE(w.ok());
  CHECK(w->type == ElemType::i16);
  CHECK(w->value(0) == 256);
  CHECK(w->value(1) == -2);
  CHECK(w->value(2) == 5);
  CHECK(w->value(3) == -32768);
  write_text(dir.file("cut-idx2-ubyte"), std::string("\0\0\x0b\x02\0\0\0\x02\0\0\0\x02\x01\x00", 14));
  auto cut = read_idx(dir.file("cut-idx2-ubyte"));
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.status().message().find("truncated") != std::string::npos);

  run_numpy(dir.path(), "np.arange(1000, dtype='<u2').tofile('train.bin'); np.arange(10, dtype='<u2').tofile('val.bin')\n");
  auto t = open_dataset(dir.file("*.bin"));
  INFO(t.status().to_string());
  REQUIRE(t.ok());
  const Field* tokens = t->splits.at("train").find("tokens");
  REQUIRE(tokens);
  CHECK(tokens->array.type == ElemType::u16);
  CHECK(tokens->array.count() == 1000);
  CHECK(tokens->array.value(999) == 999);
  CHECK(t->splits.at("val").count() == 10);
  SpecOptions u32;
  u32.token_dtype = "u32";
  auto wrong = open_dataset(dir.file("val.bin"), u32);  // 20 bytes: 5 u32 tokens, fine
  CHECK(wrong.ok());
  write_text(dir.file("odd.bin"), "abc");
  auto odd = open_dataset(dir.file("odd.bin"));
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.status().message().find("not a whole number of u16 tokens") != std::string::npos);
}

TEST_CASE("dataset spec: what users get wrong is named", "[data][spec][errors]") {
  TempDir dir;
  run_numpy(dir.path(), "np.save('x.npy', np.zeros((5, 3), 'f4')); np.save('y.npy', np.zeros(4, 'i8'))\n"
                        "os.mkdir('empty')\n");
  auto uneven = open_dataset(dir.file("x.npy") + "," + dir.file("y.npy"));
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.status().message().find("fields of different lengths: 'x' has 5 examples") != std::string::npos);
  auto missing = open_dataset(dir.file("nope.npy"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Code::not_found);
  auto none = open_dataset(dir.file("*.parquet"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("matches no file") != std::string::npos);
  auto empty = open_dataset(dir.file("empty"));
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message().find("no dataset files") != std::string::npos);
  write_text(dir.file("bad.yaml"), "splits: [a, b]\n");
  auto yaml = open_dataset(dir.file("bad.yaml"));
  REQUIRE_FALSE(yaml.ok());
  CHECK(yaml.status().message().find("needs 'splits:'") != std::string::npos);
  write_text(dir.file("typo.yaml"), "splits:\n  train: [x.npy]\nfeilds: {}\n");
  auto typo = open_dataset(dir.file("typo.yaml"));
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.status().message().find("unknown key 'feilds'") != std::string::npos);
  write_text(dir.file("notes.txt"), "hi");
  auto txt = open_dataset(dir.file("notes.txt"));
  REQUIRE_FALSE(txt.ok());
  CHECK(txt.status().message().find("not a dataset file troupe reads") != std::string::npos);
}

}  // namespace
}  // namespace troupe::data
