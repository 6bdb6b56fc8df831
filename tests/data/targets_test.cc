// Targets beyond one class per example and the data side of the trainer API (ABI 5): regression
// with --loss mse, language-model windows with --seq-len, fields by name in every batch (also
// micro-batches), the fields a trainer requires, and predict().
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "data/dataset_spec.h"
#include "tests/data/numpy_fixture.h"
#include "data/feed/batch_feed.h"
#include "data/data_source.h"
#include "trainers/local/local_trainer.h"
#include "trainers/sync/micro_batches.h"
#include "data/token_windows.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {
namespace {

using troupe::testing::run_numpy;
using troupe::testing::TempDir;

// y = x A + b + noise (std 0.05): 4 inputs, 2 values per example.
void write_regression(const std::string& dir) {
  run_numpy(dir, R"PY(
rng = np.random.default_rng(3)
A = rng.normal(0, 1, (4, 2)); b = np.array([0.5, -1.0])
for split, n in (('train', 4000), ('val', 800)):
    x = rng.normal(0, 1, (n, 4)).astype(np.float32)
    y = (x @ A + b + rng.normal(0, 0.05, (n, 2))).astype(np.float32)
    np.save('x_%s.npy' % split, x); np.save('y_%s.npy' % split, y)
)PY");
}

TEST_CASE("regression: --loss mse learns value targets, and a class target refuses floats naming the flag", "[data][targets]") {
  TempDir dir;
  write_regression(dir.path());
  TrainOptions o;
  o.data = dir.path();
  o.epochs = 10;
  o.batch_size = 32;
  o.lr = 0.01f;
  o.hidden = {32};
  SECTION("without --loss mse the float target is refused, naming the flag") {
    auto r = train_local(o, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("--loss mse") != std::string::npos);
  }
  SECTION("with it the mlp learns the linear map down to the noise") {
    o.loss = "mse";
    auto data = load_train_data(o);
    REQUIRE(data.ok());
    CHECK(data->train->classes == 0);
    CHECK(data->train->target_width == 2);
    CHECK(data->train->targets.size() == 4000u * 2);
    const DataSpec spec = data->train->spec();
    REQUIRE(spec.field("y"));
    CHECK(spec.field("y")->target);
    CHECK(spec.field("y")->type == ValueType::f32);
    CHECK(spec.field("x")->shape == std::vector<int64_t>{4});
    auto r = train_local(o, {});
    REQUIRE(r.ok());
    CHECK(r->test_accuracy == -1);  // a regression does not classify
    INFO("test loss " << r->test_loss);
    CHECK(r->test_loss >= 0);
    CHECK(r->test_loss < 0.02);  // the noise's variance is 0.0025; predicting the mean would be ~1.5
  }
  SECTION("--precision bf16 with a regression is refused by the mlp") {
    o.loss = "mse";
    o.precision = DType::bf16;
    auto r = train_local(o, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("computes in f32") != std::string::npos);
  }
}

TEST_CASE("token windows: inputs are the ids from t, targets the ids one on, and bad streams are named", "[data][targets]") {
  data::Field f;
  f.name = "tokens";
  f.source = "train.bin";
  std::vector<uint8_t> bytes(2 * 23);
  for (int i = 0; i < 23; ++i) {
    const uint16_t id = static_cast<uint16_t>((i * 7) % 11);
    std::memcpy(bytes.data() + 2 * i, &id, 2);
  }
  f.array = data::owned_array(data::ElemType::u16, {23}, bytes);
  auto id = [](int i) { return (i * 7) % 11; };
  auto w = token_windows(f, 5, 11, "train.bin");
  REQUIRE(w.ok());
  CHECK(w->count == 4);  // (23 - 1) / 5 whole windows
  CHECK(w->target_width == 5);
  CHECK(w->classes == 11);
  for (int e = 0; e < 4; ++e) {
    for (int t = 0; t < 5; ++t) {
      CHECK(w->images[e * 5 + t] == static_cast<float>(id(e * 5 + t)));
      CHECK(w->labels[e * 5 + t] == id(e * 5 + t + 1));
    }
  }
  CHECK(w->spec().field("tokens")->shape == std::vector<int64_t>{5});
  CHECK(w->spec().field("targets")->stored == ValueType::u16);

  CHECK(token_windows(f, 22, 11, "train.bin")->count == 1);  // 22 inputs and the 23rd token as the last target
  auto too_short = token_windows(f, 23, 11, "train.bin");
  REQUIRE_FALSE(too_short.ok());
  CHECK(too_short.status().message().find("23 tokens, fewer than --seq-len 23 + 1") != std::string::npos);
  auto small_vocab = token_windows(f, 5, 8, "val.bin");
  REQUIRE_FALSE(small_vocab.ok());
  CHECK(small_vocab.status().message().find("outside the vocabulary [0, 8)") != std::string::npos);
  data::Field floats = f;
  floats.array = data::owned_array(data::ElemType::f32, {4}, std::vector<uint8_t>(16));
  auto not_ids = token_windows(floats, 2, 11, "x.npy");
  REQUIRE_FALSE(not_ids.ok());
  CHECK(not_ids.status().message().find("not a flat stream of integer token ids") != std::string::npos);
}

TEST_CASE("windows: --seq-len on a .bin stream with a val split, and the refusals around it", "[data][targets]") {
  TempDir dir;
  run_numpy(dir.path(), R"PY(
np.arange(0, 1001, dtype=np.uint16).__mod__(50).astype(np.uint16).tofile('train.bin')
(np.arange(0, 301, dtype=np.uint16) % 60).astype(np.uint16).tofile('val.bin')
np.save('x.npy', np.zeros((10, 3), np.float32)); np.save('y.npy', np.zeros(10, np.int64))
)PY");
  TrainOptions o;
  o.data = dir.file("train.bin") + "," + dir.file("val.bin");
  o.seq_len = 10;
  auto d = load_train_data(o);
  REQUIRE(d.ok());
  CHECK(d->train->count == 100);
  CHECK(d->test->count == 30);
  CHECK(d->train->classes == 60);  // the largest id of both streams + 1
  CHECK(d->description.find("windows of 10") != std::string::npos);
  o.loss = "mse";
  CHECK(load_train_data(o).status().message().find("--loss mse does not apply") != std::string::npos);
  o.loss = "xent";
  o.data = dir.file("x.npy") + "," + dir.file("y.npy");
  auto two = load_train_data(o);
  REQUIRE_FALSE(two.ok());
  CHECK(two.status().message().find("name the stream with --inputs") != std::string::npos);
  o.inputs = {"x"};
  auto floats = load_train_data(o);
  REQUIRE_FALSE(floats.ok());
  CHECK(floats.status().message().find("a token stream is a flat array of integer ids") != std::string::npos);
}

// Views of several input fields: each one a stride into the rows of Batch::inputs.
TEST_CASE("every batch gives each field by name, typed and shaped, micro-batches too", "[data][targets]") {
  Dataset d;
  d.count = 6;
  d.rows = 1;
  d.cols = 5;
  d.classes = 3;
  d.schema = {FieldSpec{"a", ValueType::f32, ValueType::u8, {2}, false},
              FieldSpec{"b", ValueType::f32, ValueType::f64, {3}, false},
              FieldSpec{"label", ValueType::i32, ValueType::i64, {}, true}};
  for (int e = 0; e < 6; ++e) {
    for (int k = 0; k < 5; ++k) d.images.push_back(static_cast<float>(10 * e + k));
    d.labels.push_back(e % 3);
  }
  SliceFeed feed(d, 1, 4, 0, 1);
  REQUIRE(feed.begin_epoch(1).ok());
  Batch b;
  REQUIRE(*feed.next(&b));
  REQUIRE(b.num_fields == 3);
  const FieldView* a = b.field("a");
  const FieldView* bf = b.field("b");
  const FieldView* y = b.field("label");
  REQUIRE(a);
  REQUIRE(bf);
  REQUIRE(y);
  CHECK(b.field("nope") == nullptr);
  CHECK(a->rank == 2);
  CHECK(a->shape[0] == 4);
  CHECK(a->shape[1] == 2);
  CHECK(bf->shape[1] == 3);
  CHECK(a->row_stride == 5);
  CHECK(y->rank == 1);
  REQUIRE(y->i32());
  CHECK(a->i32() == nullptr);  // typed: an f32 field is not read as i32
  for (int r = 0; r < 4; ++r) {
    const float e = b.inputs[r * 5] / 10;  // the example this row holds
    CHECK(a->f32()[r * 5 + 1] == 10 * e + 1);
    CHECK(bf->f32()[r * 5 + 0] == 10 * e + 2);
    CHECK(bf->f32()[r * 5 + 2] == 10 * e + 4);
    CHECK(y->i32()[r] == static_cast<int>(e) % 3);
  }
  std::vector<FieldView> views;
  const Batch second = batch_rows(b, 2, 2, &views);
  CHECK(second.field("a")->shape[0] == 2);
  CHECK(second.field("b")->f32()[0] == b.inputs[2 * 5 + 2]);
  CHECK(second.field("label")->i32()[1] == b.labels[3]);
}

// A trainer that needs a field; the runtime checks before setup() runs.
class NeedsTokens final : public Trainer {
 public:
  std::vector<FieldNeed> required_fields(const JobConfig&) const override {
    return {{"tokens", {ValueType::i32}, 1}};
  }
  Status setup(const TrainerContext&, ParameterSpace& space) override {
    space.declare("w", {1}, Init::zeros());
    return {};
  }
  Expected<BatchStats> forward_backward(const Batch&, const Parameters&, Gradients&) override { return BatchStats{}; }
  Expected<BatchStats> evaluate(const Batch&, const Parameters&) override { return BatchStats{}; }
};

TEST_CASE("a dataset without a field the trainer requires is refused before setup, naming it", "[data][targets]") {
  NeedsTokens t;
  DataSpec fashion = Dataset{}.spec();
  auto missing = check_required_fields(t, JobConfig{}, fashion);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.message().find("needs a field 'tokens' (i32 of per-example rank 1)") != std::string::npos);
  CHECK(missing.message().find("image: f32[0,0] (u8 in the files)") != std::string::npos);
  DataSpec windows;
  windows.fields = {FieldSpec{"tokens", ValueType::f32, ValueType::u16, {8}, false}};
  auto typed = check_required_fields(t, JobConfig{}, windows);
  REQUIRE_FALSE(typed.ok());
  CHECK(typed.message().find("the data's is tokens: f32[8] (u16 in the files)") != std::string::npos);
  windows.fields[0].type = ValueType::i32;
  CHECK(check_required_fields(t, JobConfig{}, windows).ok());
}

TEST_CASE("the mlp's predict() gives the logits its evaluation scores", "[data][targets]") {
  TempDir dir;
  run_numpy(dir.path(), R"PY(
rng = np.random.default_rng(5)
c = rng.normal(0, 3, (3, 6))
y = rng.integers(0, 3, 600); x = (c[y] + rng.normal(0, 1, (600, 6))).astype(np.float32)
np.save('x.npy', x); np.save('y.npy', y)
)PY");
  TrainOptions o;
  o.data = dir.file("x.npy") + "," + dir.file("y.npy");
  o.hidden = {16};
  auto d = load_train_data(o);
  REQUIRE(d.ok());
  auto s = set_up_trainer(o, d->train->spec(), 0, 1);
  REQUIRE(s.ok());
  REQUIRE(s->trainer->prediction_width() == 3);
  std::vector<float> params(s->space.size());
  for (size_t i = 0; i < params.size(); ++i) params[i] = std::sin(static_cast<float>(i)) * 0.3f;
  const Parameters view(params.data(), params.size());
  const Dataset& test = *d->test;
  std::vector<float> logits(static_cast<size_t>(test.count * 3));
  BatchFields fields;
  REQUIRE(s->trainer->predict(rows_batch(test, 0, test.count, &fields, test.spec()), view, logits.data()).ok());
  int64_t right = 0;
  for (int64_t r = 0; r < test.count; ++r) {
    const float* l = logits.data() + r * 3;
    right += (std::max_element(l, l + 3) - l) == test.labels[static_cast<size_t>(r)];
  }
  auto counted = count_correct(*s->trainer, view, test, 0, test.count);
  REQUIRE(counted.ok());
  CHECK(right == *counted);
}

}  // namespace
}  // namespace troupe
