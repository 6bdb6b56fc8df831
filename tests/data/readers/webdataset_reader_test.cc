// WebDataset tar shards (data/readers/webdataset_reader.h) written with Python's tarfile and Pillow:
// members grouped by key, PNG (gray, RGB, RGBA) and JPEG decoded as Pillow decodes them, .cls and
// .txt labels, .npy members; examples without their label, mismatched images and corrupt images
// refused naming the shard and member.
#include <catch2/catch.hpp>

#include "data/dataset_spec.h"
#include "data/readers/npy_reader.h"
#include "data/readers/webdataset_reader.h"
#include "tests/data/numpy_fixture.h"

namespace troupe::data {
namespace {

using troupe::testing::run_numpy;
using troupe::testing::TempDir;

const char* kShard = R"PY(
import io, tarfile
from PIL import Image
def put(t, name, data):
    info = tarfile.TarInfo(name); info.size = len(data); t.addfile(info, io.BytesIO(data))
def png(a):
    b = io.BytesIO(); Image.fromarray(a).save(b, format='PNG'); return b.getvalue()
def jpg(a):
    b = io.BytesIO(); Image.fromarray(a).save(b, format='JPEG', quality=90); return b.getvalue()
rng = np.random.default_rng(3)
)PY";

TEST_CASE("webdataset: PNG and JPEG images, .cls, .txt and .npy members by key", "[data][webdataset]") {
  TempDir dir;
  run_numpy(dir.path(), std::string(kShard) + R"PY(
rgb = rng.integers(0, 256, (3, 5, 4, 3), dtype=np.uint8)
gray = rng.integers(0, 256, (3, 6, 7), dtype=np.uint8)
decoded = []
with tarfile.open('mixed.tar', 'w') as t:
    for i in range(3):
        put(t, 'dir/k%d.png' % i, png(rgb[i])); put(t, 'dir/k%d.cls' % i, b'%d\n' % (i * 2))
        put(t, 'dir/k%d.txt' % i, ['cat', 'dog', 'cat'][i].encode()); put(t, 'dir/k%d.json' % i, b'{}')
        j = jpg(gray[i]); put(t, 'dir/k%d.jpg' % i, j); decoded.append(np.asarray(Image.open(io.BytesIO(j))))
        b = io.BytesIO(); np.save(b, np.arange(4, dtype='f4') + i); put(t, 'dir/k%d.feat.npy' % i, b.getvalue())
np.save('rgb.npy', rgb); np.save('jpeg_decoded.npy', np.stack(decoded))
)PY");
  auto t = read_webdataset({dir.file("mixed.tar")});
  INFO(t.status().to_string());
  REQUIRE(t.ok());
  CHECK(t->count() == 3);
  const Field* png = t->find("png");
  REQUIRE(png);
  CHECK(png->array.example_shape() == std::vector<int64_t>{5, 4, 3});
  auto rgb = read_npy(dir.file("rgb.npy"));
  REQUIRE(rgb.ok());
  CHECK(std::equal(rgb->bytes, rgb->bytes + rgb->byte_size(), png->array.bytes));
  const Field* jpg = t->find("jpg");
  REQUIRE(jpg);
  CHECK(jpg->array.example_shape() == std::vector<int64_t>{6, 7, 1});
  auto pil = read_npy(dir.file("jpeg_decoded.npy"));
  REQUIRE(pil.ok());
  CHECK(std::equal(pil->bytes, pil->bytes + pil->byte_size(), jpg->array.bytes));  // as Pillow decodes it
  const Field* cls = t->find("cls");
  REQUIRE(cls);
  CHECK(cls->array.value(2) == 4);
  const Field* txt = t->find("txt");
  REQUIRE(txt);
  CHECK(txt->classes == std::vector<std::string>{"cat", "dog"});
  CHECK(txt->array.value(1) == 1);
  const Field* feat = t->find("feat.npy");
  REQUIRE(feat);
  CHECK(feat->array.value(4 * 2 + 3) == 5);
  CHECK(t->find("json") == nullptr);  // metadata is not read
}

TEST_CASE("webdataset: missing labels, mismatched and corrupt images are named", "[data][webdataset][errors]") {
  TempDir dir;
  run_numpy(dir.path(), std::string(kShard) + R"PY(
a = rng.integers(0, 256, (4, 4), dtype=np.uint8)
with tarfile.open('nolabel.tar', 'w') as t:
    put(t, 'x0.png', png(a)); put(t, 'x0.cls', b'1'); put(t, 'x1.png', png(a))
with tarfile.open('sizes.tar', 'w') as t:
    put(t, 'x0.png', png(a)); put(t, 'x0.cls', b'1'); put(t, 'x1.png', png(np.zeros((5, 4), np.uint8))); put(t, 'x1.cls', b'0')
with tarfile.open('corrupt.tar', 'w') as t:
    put(t, 'x0.png', png(a)[:30]); put(t, 'x0.cls', b'1')
with tarfile.open('cutjpeg.tar', 'w') as t:
    j = jpg(rng.integers(0, 256, (32, 32), dtype=np.uint8)); put(t, 'x0.jpg', j[:len(j) // 2]); put(t, 'x0.cls', b'1')
with tarfile.open('badcls.tar', 'w') as t:
    put(t, 'x0.png', png(a)); put(t, 'x0.cls', b'cat')
open('notatar.tar', 'wb').write(b'hello' * 100)
)PY");
  struct Case {
    const char* shard;
    const char* says;
  };
  const Case cases[] = {{"nolabel.tar", "example 'x1' has no .cls member"},
                        {"sizes.tar", "x1.png is u8[5,4,1]"},
                        {"corrupt.tar", "[x0.png]: not a readable PNG"},
                        {"badcls.tar", "'cat' is not a class number"},
                        {"cutjpeg.tar", "[x0.jpg]: damaged JPEG"},
                        {"notatar.tar", "notatar.tar"}};
  for (const Case& c : cases) {
    CAPTURE(c.shard);
    auto t = read_webdataset({dir.file(c.shard)});
    REQUIRE_FALSE(t.ok());
    INFO(t.status().to_string());
    CHECK(t.status().message().find(c.says) != std::string::npos);
    CHECK(t.status().message().find(dir.file(c.shard)) != std::string::npos);
  }
}

}  // namespace
}  // namespace troupe::data
