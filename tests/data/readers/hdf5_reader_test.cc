// HDF5 files written by h5py (data/readers/hdf5_reader.h): numeric datasets in groups read back
// exactly, in blocks of rows; --data on a file with train/ and test/ groups; a dataset name the
// file lacks, an unsupported type and a damaged file refused naming them.
#include <catch2/catch.hpp>

#include "data/dataset_spec.h"
#include "data/readers/hdf5_reader.h"
#include "tests/data/numpy_fixture.h"

namespace troupe::data {
namespace {

using troupe::testing::read_bytes;
using troupe::testing::run_numpy;
using troupe::testing::TempDir;
using troupe::testing::write_text;

TEST_CASE("hdf5: datasets in groups read back exactly and make splits", "[data][hdf5]") {
  TempDir dir;
  run_numpy(dir.path(), "import h5py\n"
                        "with h5py.File('d.h5', 'w') as f:\n"
                        "    f['train/image'] = (np.arange(5 * 4 * 3) % 256).astype('u1').reshape(5, 4, 3)\n"
                        "    f.create_dataset('train/label', data=np.arange(5, dtype='>i4'), chunks=(2,))\n"
                        "    f['test/image'] = np.zeros((2, 4, 3), 'u1'); f['test/label'] = np.ones(2, 'i8')\n"
                        "with h5py.File('meta.h5', 'w') as f:\n"
                        "    f['weights'] = np.linspace(0, 1, 7).astype('f8'); f['names'] = np.array([b'a', b'b'])\n");
  auto all = read_hdf5(dir.file("meta.h5"));
  INFO(all.status().to_string());
  REQUIRE(all.ok());
  REQUIRE(all->size() == 1);
  CHECK(all->front().first == "weights");  // the strings dataset is not a field
  CHECK(all->front().second.value(6) == 1.0);
  auto only = read_hdf5(dir.file("d.h5"), {"train/label"});
  REQUIRE(only.ok());
  REQUIRE(only->size() == 1);
  const Array& label = (*only)[0].second;
  CHECK(label.type == ElemType::i32);  // big-endian on disk, native in memory
  for (size_t i = 0; i < 5; ++i) CHECK(label.value(i) == static_cast<double>(i));
  auto d = open_dataset(dir.file("d.h5"));
  INFO(d.status().to_string());
  REQUIRE(d.ok());
  REQUIRE(d->splits.count("train"));
  CHECK(d->splits.at("train").count() == 5);
  CHECK(d->splits.at("train").find("image")->array.example_shape() == std::vector<int64_t>{4, 3});
  CHECK(d->splits.at("train").find("image")->array.value(59) == 59);
  CHECK(d->splits.at("test").count() == 2);
}

TEST_CASE("hdf5: a missing dataset name, an unsupported type and a damaged file are named", "[data][hdf5][errors]") {
  TempDir dir;
  run_numpy(dir.path(), "import h5py\n"
                        "with h5py.File('d.h5', 'w') as f:\n"
                        "    f['x'] = np.zeros((3, 2), 'f4'); f['y'] = np.zeros(3, 'u8')\n");
  auto missing = read_hdf5(dir.file("d.h5"), {"x", "label"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("no dataset named 'label' (it has: x, y)") != std::string::npos);
  auto u64 = read_hdf5(dir.file("d.h5"), {"y"});
  REQUIRE_FALSE(u64.ok());
  CHECK(u64.status().message().find("[y]: its type is not supported") != std::string::npos);
  write_text(dir.file("cut.h5"), read_bytes(dir.file("d.h5")).substr(0, 100));
  auto cut = read_hdf5(dir.file("cut.h5"));
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.status().code() == Code::corrupt_data);
  CHECK(cut.status().message().find("cut.h5") != std::string::npos);
  write_text(dir.file("spec.yaml"), "splits:\n  train: [d.h5]\ndatasets: [x, z]\n");
  auto yaml = open_dataset(dir.file("spec.yaml"));
  REQUIRE_FALSE(yaml.ok());
  CHECK(yaml.status().message().find("no dataset named 'z'") != std::string::npos);
}

}  // namespace
}  // namespace troupe::data
