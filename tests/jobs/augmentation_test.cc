// Augmentation (Trainer::transform_example): the cnn's flip and crop, applied to training batches
// only, the same example transformed the same way in every run, restart and replay (seeded by the
// job's seed, the epoch and the example), in the local feed and in the ledger feed's pipeline
// threads alike — and a replay's rows (rows_of) are exactly the rows that were trained.
#include <catch2/catch.hpp>

#include <algorithm>

#include "gcs/in_memory_store.h"
#include "tests/support/numeric_test_util.h"
#include "data/feed/batch_feed.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;

namespace {

TrainOptions cnn(std::vector<std::string> args) {
  TrainOptions o;
  o.model = "cnn";
  o.trainer_args = std::move(args);
  o.seed = 5;
  return o;
}

DataSpec images(std::vector<int64_t> shape) {
  DataSpec d;
  d.features = 1;
  for (int64_t v : shape) d.features *= v;
  d.classes = 2;
  d.fields = {FieldSpec{"image", ValueType::f32, ValueType::u8, shape, false},
              FieldSpec{"label", ValueType::i32, ValueType::i64, {}, true}};
  return d;
}

// Small images whose every value is distinct and non-zero (so a zero is padding).
Dataset distinct_images(int64_t count, int h, int w) {
  Dataset d;
  d.count = count;
  d.rows = h;
  d.cols = w;
  d.classes = 2;
  for (int64_t i = 0; i < count * h * w; ++i) d.images.push_back(static_cast<float>(i + 1));
  for (int64_t i = 0; i < count; ++i) d.labels.push_back(static_cast<int32_t>(i % 2));
  return d;
}

}  // namespace

TEST_CASE("cnn flip and crop: a mirror half the time, a shifted window of the zero-padded image", "[augment]") {
  auto s = set_up_trainer(cnn({"channels=2", "flip=1", "crop=2"}), images({3, 6, 5}), 0, 1);  // CHW
  REQUIRE(s.ok());
  const Trainer& t = *s->trainer;
  REQUIRE(t.transforms_inputs());
  const int c = 3, h = 6, w = 5;
  std::vector<float> in(c * h * w);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i + 1);
  int flipped = 0, shifted = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> out = in;
    t.transform_example(seed, out.data());
    std::vector<float> again = in;
    t.transform_example(seed, again.data());
    CHECK(out == again);  // a function of the seed alone
    // Find the (flip, dy, dx) that explains it: exactly one must.
    int explained = 0;
    for (int f = 0; f < 2; ++f)
      for (int dy = -2; dy <= 2; ++dy)
        for (int dx = -2; dx <= 2; ++dx) {
          bool all = true;
          for (int ch = 0; ch < c && all; ++ch)
            for (int y = 0; y < h && all; ++y)
              for (int x = 0; x < w && all; ++x) {
                const int sy = y + dy, sx = (f ? w - 1 - x : x) + dx;
                const float want = sy >= 0 && sy < h && sx >= 0 && sx < w ? in[(ch * h + sy) * w + sx] : 0.0f;
                all = out[(ch * h + y) * w + x] == want;
              }
          if (all) {
            ++explained;
            flipped += f;
            shifted += dy != 0 || dx != 0;
          }
        }
    CHECK(explained == 1);
  }
  CHECK(flipped > 60);  // about half of 200
  CHECK(flipped < 140);
  CHECK(shifted > 150);  // 24 of 25 offsets move the window

  SECTION("an HWC image is transformed as its CHW twin") {
    auto hwc = set_up_trainer(cnn({"channels=2", "flip=1", "crop=2"}), images({h, w, c}), 0, 1);
    REQUIRE(hwc.ok());
    std::vector<float> rows(in.size());  // in, as HWC
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < h * w; ++p) rows[p * c + ch] = in[ch * h * w + p];
    for (uint64_t seed : {3ull, 12345ull, 987654321ull}) {
      std::vector<float> a = in, b = rows;
      t.transform_example(seed, a.data());
      hwc->trainer->transform_example(seed, b.data());
      for (int ch = 0; ch < c; ++ch)
        for (int p = 0; p < h * w; ++p) CHECK(b[p * c + ch] == a[ch * h * w + p]);
    }
  }
  auto plain = set_up_trainer(cnn({"channels=2"}), images({3, 6, 5}), 0, 1);
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->trainer->transforms_inputs());
  CHECK(set_up_trainer(cnn({"flip=2"}), images({3, 6, 5}), 0, 1).status().message().find("flip=2: 0 or 1") !=
        std::string::npos);
  CHECK(set_up_trainer(cnn({"crop=5"}), images({3, 6, 5}), 0, 1).status().message().find("crop=5") != std::string::npos);
}

TEST_CASE("training batches are augmented per (seed, epoch, example), and replays gather the very rows trained",
          "[augment]") {
  const Dataset d = distinct_images(64, 6, 6);
  auto s = set_up_trainer(cnn({"channels=2", "flip=1", "crop=1"}), d.spec(), 0, 1);
  REQUIRE(s.ok());
  const ExampleTransform t = trainer_transform(*s->trainer, 5);
  REQUIRE(t);
  const int64_t f = d.features();
  // The expected rows of example `idx` in `epoch`.
  auto expected = [&](int epoch, int64_t idx) {
    std::vector<float> x(d.images.begin() + idx * f, d.images.begin() + (idx + 1) * f);
    t(epoch, idx, x.data());
    return x;
  };

  SECTION("the local feed") {
    SliceFeed feed(d, 5, 16, 0, 1);
    feed.set_transform(t);
    int differ = 0;
    for (int epoch : {1, 2}) {
      REQUIRE(feed.begin_epoch(epoch).ok());
      Batch b;
      REQUIRE(*feed.next(&b));
      for (int64_t r = 0; r < b.size; ++r) {
        const std::vector<float> row(b.inputs + r * f, b.inputs + (r + 1) * f);
        // The example is recognised by its values (distinct ones; a flip or shift keeps most).
        int64_t idx = -1;
        for (int64_t i = 0; i < d.count && idx < 0; ++i)
          if (row == expected(epoch, i)) idx = i;
        CHECK(idx >= 0);
        if (idx >= 0 && row != std::vector<float>(d.images.begin() + idx * f, d.images.begin() + (idx + 1) * f))
          ++differ;
      }
    }
    CHECK(differ > 20);  // most of the 32 rows were changed
    CHECK(expected(1, 7) != expected(2, 7));  // another epoch, another draw (for this example and seed)
  }

  SECTION("the ledger feed's pipeline threads, and rows_of for a replay") {
    gcs::InMemoryStore store;
    job::LedgerFeedOptions fo;
    fo.plan.shards = 4;
    fo.plan.seed = 5;
    fo.batch_size = 8;
    fo.keep_partial = true;
    job::LedgerFeed feed(d, store, JobId::random(), WorkerId::random(), fo);
    feed.set_transform(t);
    REQUIRE(feed.begin_epoch(1).ok());
    int batches = 0, changed = 0;
    while (true) {
      Batch b;
      auto more = feed.next(&b);
      REQUIRE(more.ok());
      if (!*more) break;
      const DataTag tag = feed.position();
      GatheredRows rows;
      REQUIRE(feed.rows_of(tag, &rows).ok());
      CHECK(rows.rows == b.size);
      CHECK(rows.inputs == std::vector<float>(b.inputs, b.inputs + b.size * f));
      CHECK(rows.labels == std::vector<int32_t>(b.labels, b.labels + b.size));
      // ... and those rows are transformed: none is its example as stored (values are distinct)
      for (int64_t r = 0; r < b.size; ++r) {
        const float* row = b.inputs + r * f;
        bool stored = false;
        for (int64_t i = 0; i < d.count && !stored; ++i)
          stored = std::equal(row, row + f, d.images.begin() + i * f);
        changed += stored ? 0 : 1;
      }
      REQUIRE(feed.trained().ok());
      ++batches;
    }
    CHECK(batches == 8);
    CHECK(changed > 48);  // of 64: flip and crop leave about 1 in 50 unchanged
    REQUIRE(feed.end_epoch().ok());
    // Clearing the transform (a loop returning) stops the pipeline threads that ran it.
    feed.set_transform({});
    CHECK_FALSE(feed.next(nullptr).ok());  // until the next epoch begins
    REQUIRE(feed.begin_epoch(2).ok());
  }
}
