// The user's data as the trainers take it (data/data_source.h): the same Fashion-MNIST examples
// from IDX, .npy, .npz, CSV and WebDataset files give the same Dataset bit for bit and the same parameters after
// 100 steps; the fields a model reads; validation splits; and refusals before anything trains.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>

#include "data/dataset_spec.h"
#include "tests/data/numpy_fixture.h"
#include "data/data_source.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {
namespace {

using troupe::testing::run_numpy;
using troupe::testing::TempDir;
using troupe::testing::idx_py;
using troupe::testing::write_fashion_npy;
using troupe::testing::write_text;

// The first 6,400 training and 1,000 test images of Fashion-MNIST, written by NumPy as IDX (gzip),
// .npy (Keras names), .npz, CSV (label first, 784 pixel columns) and WebDataset PNG shards (Pillow).
void write_formats(const std::string& dir) {
  run_numpy(dir, idx_py() + R"PY(
def write_idx(path, a):
    head = bytes([0, 0, 8, a.ndim]) + b''.join(int(d).to_bytes(4, 'big') for d in a.shape)
    with gzip.open(path, 'wb') as f: f.write(head + a.tobytes())
xtr = idx(src + '/train-images-idx3-ubyte.gz')[:6400]; ytr = idx(src + '/train-labels-idx1-ubyte.gz')[:6400]
xte = idx(src + '/t10k-images-idx3-ubyte.gz')[:1000]; yte = idx(src + '/t10k-labels-idx1-ubyte.gz')[:1000]
os.mkdir('idx'); os.mkdir('npy'); os.mkdir('csv')
write_idx('idx/train-images-idx3-ubyte.gz', xtr); write_idx('idx/train-labels-idx1-ubyte.gz', ytr)
write_idx('idx/t10k-images-idx3-ubyte.gz', xte); write_idx('idx/t10k-labels-idx1-ubyte.gz', yte)
np.save('npy/x_train.npy', xtr); np.save('npy/y_train.npy', ytr.astype(np.int64))
np.save('npy/x_test.npy', xte); np.save('npy/y_test.npy', yte.astype(np.int32))
np.savez_compressed('fm.npz', x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
import io, tarfile
from PIL import Image
def shard(path, xs, ys):
    with tarfile.open(path, 'w') as t:
        for i, (x, y) in enumerate(zip(xs, ys)):
            for ext, data in (('png', None), ('cls', str(int(y)).encode())):
                if data is None:
                    buf = io.BytesIO(); Image.fromarray(x).save(buf, format='PNG'); data = buf.getvalue()
                info = tarfile.TarInfo('s%06d.%s' % (i, ext)); info.size = len(data)
                t.addfile(info, io.BytesIO(data))
os.mkdir('wds')
shard('wds/train-000000.tar', xtr[:3200], ytr[:3200]); shard('wds/train-000001.tar', xtr[3200:], ytr[3200:])
shard('wds/test-000000.tar', xte, yte)
names = 'label,' + ','.join('p%d' % i for i in range(784))
np.savetxt('csv/train.csv', np.concatenate([ytr[:, None], xtr.reshape(len(xtr), -1)], 1), fmt='%d', delimiter=',', header=names, comments='')
np.savetxt('csv/test.csv', np.concatenate([yte[:, None], xte.reshape(len(xte), -1)], 1), fmt='%d', delimiter=',', header=names, comments='')
)PY");
}

bool same(const Dataset& a, const Dataset& b) {
  return a.count == b.count && a.classes == b.classes && a.features() == b.features() && a.labels == b.labels &&
         std::memcmp(a.images.data(), b.images.data(), a.images.size() * sizeof(float)) == 0;
}

TEST_CASE("data source: IDX, .npy, .npz, CSV and WebDataset PNG shards give the same examples and parameters",
          "[data][source]") {
  TempDir dir;
  write_formats(dir.path());
  const std::map<std::string, std::string> specs{{"idx", dir.file("idx")},
                                                 {"npy", dir.file("npy")},
                                                 {"npz", dir.file("fm.npz")},
                                                 {"csv", dir.file("csv")},
                                                 {"webdataset", dir.file("wds/*.tar")}};
  std::map<std::string, TrainData> loaded;
  for (const auto& [name, spec] : specs) {
    CAPTURE(name);
    TrainOptions o;
    o.data = spec;
    auto d = load_train_data(o);
    INFO(d.status().to_string());
    REQUIRE(d.ok());
    CHECK(d->train->count == 6400);
    CHECK(d->test->count == 1000);
    CHECK(d->train->classes == 10);
    CHECK(d->train->rows * d->train->cols == 784);
    loaded[name] = *d;
  }
  for (const auto& [name, d] : loaded) {
    CAPTURE(name);
    CHECK(same(*d.train, *loaded.at("idx").train));
    CHECK(same(*d.test, *loaded.at("idx").test));
  }
  TrainOptions o;
  o.max_steps = 100;
  o.epochs = 1;
  o.batch_size = 64;
  std::map<std::string, std::vector<float>> params;
  for (const auto& [name, d] : loaded) {
    Replica alone;
    auto r = train_replica(o, *d.train, *d.test, alone, {}, &params[name]);
    INFO(name << ": " << r.status().to_string());
    REQUIRE(r.ok());
    CHECK(r->steps == 100);
  }
  for (const auto& [name, p] : params) {
    CAPTURE(name);
    CHECK(p == params.at("idx"));
  }
}

TEST_CASE("data source: the MLP reaches 0.885 in 10 epochs from .npy files", "[data][source][e2e]") {
  TempDir dir;
  write_fashion_npy(dir.path());
  TrainOptions o;
  o.data = dir.file("*.npy");
  auto d = load_train_data(o);
  INFO(d.status().to_string());
  REQUIRE(d.ok());
  CHECK(d->train->rows == 28);
  CHECK(d->train->cols == 28);
  auto r = train_with_trainer(o, *d->train, *d->test, {});
  REQUIRE(r.ok());
  WARN("mlp from .npy, 10 epochs: test accuracy " << r->test_accuracy);
  CHECK(r->test_accuracy >= 0.885);
}

TEST_CASE("data source: inputs, target and validation", "[data][source]") {
  TempDir dir;
  run_numpy(dir.path(), "rng = np.random.default_rng(1)\n"
                        "np.savez('t.npz', a=rng.random((100, 3)).astype('f4'), b=np.arange(100, dtype='i2'),"
                        " label=np.repeat(np.arange(4), 25), other=np.zeros(100, 'f8'))\n"
                        "np.savez('two.npz', label=np.zeros(10, 'i4'), y=np.zeros(10, 'i4'), x=np.zeros((10, 2), 'f4'))\n");
  TrainOptions o;
  o.data = dir.file("t.npz");
  o.inputs = {"a", "b"};
  o.val_fraction = 0.2;
  auto d = load_train_data(o);
  INFO(d.status().to_string());
  REQUIRE(d.ok());
  CHECK(d->train->features() == 4);  // a's 3 values and b
  CHECK(d->train->count == 80);
  CHECK(d->test->count == 20);
  std::map<int32_t, int> per_class;
  for (int32_t l : d->test->labels) ++per_class[l];
  CHECK(per_class == std::map<int32_t, int>{{0, 5}, {1, 5}, {2, 5}, {3, 5}});  // stratified
  CHECK(d->description.find("inputs a (f32[3]), b (i16[])") != std::string::npos);
  auto again = load_train_data(o);
  REQUIRE(again.ok());
  CHECK(again->test->labels == d->test->labels);
  CHECK(again->test->images == d->test->images);  // seeded: the same split every time
  o.seed = 2;
  auto other = load_train_data(o);
  REQUIRE(other.ok());
  CHECK(other->test->images != d->test->images);

  struct Case {
    std::vector<std::string> inputs;
    std::string target, data;
    const char* says;
  };
  const Case cases[] = {
      {{"nope"}, "", dir.file("t.npz"), "no field 'nope' for --inputs"},
      {{"a"}, "missing", dir.file("t.npz"), "no field 'missing' for --target"},
      {{"label"}, "", dir.file("t.npz"), "'label' is the target"},
      {{}, "a", dir.file("t.npz"), "holds one integer class per example"},
      {{}, "", dir.file("two.npz"), "several fields could be the target"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.says);
    TrainOptions bad;
    bad.data = c.data;
    bad.inputs = c.inputs;
    bad.target = c.target;
    auto r = load_train_data(bad);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().to_string());
    CHECK(r.status().message().find(c.says) != std::string::npos);
  }
}

TEST_CASE("data source: labels out of range, text labels and non-finite inputs are refused", "[data][source][errors]") {
  TempDir dir;
  run_numpy(dir.path(), "np.savez('neg.npz', x=np.zeros((4, 2), 'f4'), y=np.array([0, 1, -1, 0]))\n"
                        "np.savez('nan.npz', x=np.array([[0, 1], [np.nan, 2]], 'f4'), y=np.array([0, 1]))\n"
                        "np.savez('ids.npz', x=np.zeros((2, 2), 'f4'), y=np.array([0, 5000000]))\n"
                        "np.savez('tr.npz', x=np.zeros((4, 2), 'u1'), y=np.array([0, 1, 0, 1]))\n"
                        "np.savez('va.npz', x=np.zeros((2, 2), 'f4'), y=np.array([0, 1]))\n");
  TrainOptions ids;
  ids.data = dir.file("ids.npz");
  ids.val_fraction = 0.5;
  auto huge = load_train_data(ids);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().message().find("label 5000000 in 'y'") != std::string::npos);
  TrainOptions kinds;  // u8 inputs for training, f32 for validation: scaled differently, refused
  kinds.data = dir.file("tr.npz");
  kinds.val = dir.file("va.npz");
  auto mixed = load_train_data(kinds);
  REQUIRE_FALSE(mixed.ok());
  CHECK(mixed.status().message().find("field 'x' is f32[2]") != std::string::npos);
  TrainOptions o;
  o.data = dir.file("neg.npz");
  auto neg = load_train_data(o);
  REQUIRE_FALSE(neg.ok());
  CHECK(neg.status().message().find("label -1 of example 2 in 'y'") != std::string::npos);
  o.data = dir.file("nan.npz");
  o.val_fraction = 0.5;
  auto nan = load_train_data(o);
  REQUIRE_FALSE(nan.ok());
  CHECK(nan.status().message().find("NaN or infinite input") != std::string::npos);

  // A fixed class count (the model's) and a label beyond it.
  auto opened = data::open_dataset(dir.file("neg.npz").substr(0, 0) + dir.file("nan.npz"));
  REQUIRE(opened.ok());
  auto beyond = to_dataset(opened->splits.at("train"), {}, "y", 1, "nan.npz");
  REQUIRE_FALSE(beyond.ok());
  CHECK(beyond.status().message().find("is out of range: the training set has classes 0..0") != std::string::npos);

  // Text labels: the validation file's names are mapped to the training file's classes.
  write_text(dir.file("train.csv"), "x,kind\n1,cat\n2,dog\n3,cat\n4,dog\n");
  write_text(dir.file("val.csv"), "x,kind\n5,dog\n6,dog\n");
  write_text(dir.file("bad_val.csv"), "x,kind\n5,bird\n");
  TrainOptions t;
  t.data = dir.file("train.csv");
  t.val = dir.file("val.csv");
  t.target = "kind";
  auto text = load_train_data(t);
  INFO(text.status().to_string());
  REQUIRE(text.ok());
  CHECK(text->train->classes == 2);
  CHECK(text->test->labels == std::vector<int32_t>{1, 1});  // "dog" is class 1 in the training file
  t.val = dir.file("bad_val.csv");
  auto bird = load_train_data(t);
  REQUIRE_FALSE(bird.ok());
  CHECK(bird.status().message().find("label 'bird' of example 0") != std::string::npos);
}

}  // namespace
}  // namespace troupe
