// --normalize: input fields shifted and scaled by the training split's statistics — computed at
// load (standard) or read from `troupe data inspect --stats-out` — on the training and evaluation
// sets alike, in memory or streamed, and kept in the saved model.
#include <catch2/catch.hpp>

#include <cmath>

#include "data/safetensors.h"
#include "tests/data/numpy_fixture.h"
#include "tests/support/run_command.h"
#include "data/data_source.h"
#include "trainers/local/local_trainer.h"
#include "data/feed/streamed_inputs.h"

namespace troupe {
namespace {

using troupe::testing::run_command;
using troupe::testing::run_numpy;
using troupe::testing::TempDir;

void write_fields(const std::string& dir) {
  run_numpy(dir, R"PY(
rng = np.random.default_rng(6)
for split, n in (('train', 2000), ('val', 500)):
    y = rng.integers(0, 2, n)
    px = rng.integers(0, 120, (n, 5)).astype(np.uint8); px[:, 0] += (y * 100).astype(np.uint8)
    f = (rng.normal(100, 20, (n, 3)) + y[:, None] * 30).astype(np.float32)
    np.save('px_%s.npy' % split, px); np.save('f_%s.npy' % split, f); np.save('y_%s.npy' % split, y)
)PY");
}

// Mean and std of input values [from, from + width) of every example.
std::pair<double, double> moments(const Dataset& d, int64_t from, int64_t width) {
  double s = 0, s2 = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < d.count; ++i)
    for (int64_t k = from; k < from + width; ++k) {
      const double v = d.images[static_cast<size_t>(i * d.features() + k)];
      s += v;
      s2 += v * v;
      ++n;
    }
  const double m = s / n;
  return {m, std::sqrt(s2 / n - m * m)};
}

TEST_CASE("normalize: --normalize standard gives the training split zero mean and unit variance per field", "[data][normalize]") {
  TempDir dir;
  write_fields(dir.path());
  TrainOptions o;
  o.data = dir.path();
  o.inputs = {"px", "f"};
  auto plain = load_train_data(o);
  o.normalize = "standard";
  auto norm = load_train_data(o);
  REQUIRE(plain.ok());
  REQUIRE(norm.ok());
  CHECK(norm->description.find("normalised (standard)") != std::string::npos);
  const Dataset& t = *norm->train;
  for (auto [from, width] : {std::pair<int64_t, int64_t>{0, 5}, {5, 3}}) {
    const auto [m, s] = moments(t, from, width);
    CHECK(std::fabs(m) < 1e-5);
    CHECK(s == Approx(1.0).epsilon(1e-4));
  }
  // The validation set is normalised by the training split's statistics, not its own.
  const auto [pm, ps] = moments(*plain->train, 5, 3);
  const Dataset& raw_val = *plain->test;
  const float want = static_cast<float>((raw_val.images[5] - static_cast<float>(pm)) * static_cast<float>(1.0 / ps));
  CHECK(norm->test->images[5] == Approx(want).epsilon(1e-5));
  CHECK(std::fabs(moments(*norm->test, 5, 3).first) > 1e-4);  // its own mean is not exactly 0
  CHECK(t.normalization.find("\"px\"") != std::string::npos);

  SECTION("streamed, the same values as they are read") {
    o.stream = true;
    auto streamed = load_train_data(o);
    REQUIRE(streamed.ok());
    std::vector<float> row(static_cast<size_t>(t.features()));
    for (int64_t i : {int64_t{0}, int64_t{1234}}) {
      streamed->train->stream->copy(i, row.data());
      CHECK(std::equal(row.begin(), row.end(), t.images.begin() + i * t.features()));
    }
  }
  SECTION("the saved model carries the statistics") {
    o.epochs = 1;
    o.save_path = dir.file("m.safetensors");
    auto r = train_local(o, {});
    REQUIRE(r.ok());
    CHECK(r->test_accuracy > 0.8);
    auto m = data::read_safetensors(o.save_path);
    REQUIRE(m.ok());
    CHECK(m->metadata.at("troupe.normalization") == t.normalization);
  }
}

TEST_CASE("normalize: --normalize FILE takes the statistics troupe data inspect --stats-out wrote, and names what is wrong",
          "[data][normalize]") {
  TempDir dir;
  write_fields(dir.path());
  const std::string stats = dir.file("stats.json");
  auto r = run_command(troupe::testing::troupe_binary() + " data inspect " + dir.path() + " --stats-out " + stats, 120);
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  TrainOptions o;
  o.data = dir.path();
  o.inputs = {"px", "f"};
  o.normalize = "standard";
  auto standard = load_train_data(o);
  o.normalize = stats;
  auto from_file = load_train_data(o);
  REQUIRE(standard.ok());
  REQUIRE(from_file.ok());
  CHECK(from_file->train->images == standard->train->images);  // the same sums, the same rounding
  CHECK(from_file->test->images == standard->test->images);

  troupe::testing::write_text(dir.file("lacks.json"), R"({"format": 1, "fields": {"px": {"mean": 1, "std": 2}}})");
  o.normalize = dir.file("lacks.json");
  CHECK(load_train_data(o).status().message().find("has no statistics of the input field 'f'") != std::string::npos);
  troupe::testing::write_text(dir.file("typed.json"),
                              R"({"fields": {"px": {"type": "f32", "mean": 1, "std": 2}, "f": {"mean": 0, "std": 1}}})");
  o.normalize = dir.file("typed.json");
  CHECK(load_train_data(o).status().message().find("are of f32 values; the data's field is u8") != std::string::npos);
  troupe::testing::write_text(dir.file("junk.json"), "[1, 2]");
  o.normalize = dir.file("junk.json");
  CHECK(load_train_data(o).status().message().find("no \"fields\" object") != std::string::npos);
  o.normalize = dir.file("absent.json");
  CHECK(load_train_data(o).status().message().find("absent.json") != std::string::npos);
  o.normalize = "standard";
  o.data.clear();
  CHECK(load_train_data(o).status().message().find("--normalize applies to --data") != std::string::npos);
}

}  // namespace
}  // namespace troupe
