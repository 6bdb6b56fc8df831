// The trained model leaves troupe (trainers/setup/model_file.h): `--save` writes the MLP as safetensors,
// a NumPy forward pass over that file alone gets troupe's test accuracy, `--init-from` continues
// from it (fine-tuning), and a file of another model is refused by name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "data/safetensors.h"
#include "tests/data/numpy_fixture.h"
#include "trainers/local/local_trainer.h"
#include "trainers/setup/model_file.h"
#include "trainers/predict/predict.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {
namespace {

using troupe::testing::idx_py;
using troupe::testing::read_bytes;
using troupe::testing::run_numpy;
using troupe::testing::TempDir;

TEST_CASE("model file: the saved MLP's forward pass in NumPy gets troupe's test accuracy, and --init-from continues",
          "[data][model]") {
  TempDir dir;
  TrainOptions o;
  o.epochs = 1;
  o.save_path = dir.file("mlp.safetensors");
  auto trained = train_local(o, {});
  INFO(trained.status().to_string());
  REQUIRE(trained.ok());
  auto file = data::read_safetensors(o.save_path);
  REQUIRE(file.ok());
  CHECK(file->metadata.at(kModelTrainer) == "mlp");
  CHECK(file->metadata.at("troupe.step") == "468");
  CHECK(file->find("w0")->shape == std::vector<int64_t>{784, 256});

  // NumPy alone: the format, the MLP (x/255, ReLU hidden layers, argmax) and the test set.
  run_numpy(dir.path(), idx_py() + R"PY(
import json, struct
raw = open('mlp.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]; h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
def get(name):
    t = h[name]; b, e = t['data_offsets']
    return np.frombuffer(data[b:e], dtype='<f4').reshape(t['shape'])
x = idx(src + '/t10k-images-idx3-ubyte.gz').reshape(10000, -1).astype(np.float32) / np.float32(255)
y = idx(src + '/t10k-labels-idx1-ubyte.gz')
a = x
for l in range(3):
    a = a @ get('w%d' % l) + get('b%d' % l)
    if l < 2: a = np.maximum(a, 0)
open('numpy_accuracy.txt', 'w').write(repr(float((a.argmax(1) == y).mean())))
np.save('numpy_logits.npy', a); np.save('x_test.npy', idx(src + '/t10k-images-idx3-ubyte.gz')); np.save('y_test.npy', y)
)PY");
  std::ifstream acc(dir.file("numpy_accuracy.txt"));
  double numpy_accuracy = -1;
  acc >> numpy_accuracy;
  WARN("troupe test accuracy " << trained->test_accuracy << ", NumPy's forward pass on the saved file "
                               << numpy_accuracy);
  CHECK(std::fabs(numpy_accuracy - trained->test_accuracy) <= 2e-4);  // at most 2 of 10,000 images (summation order)

  // troupe predict over the same test set as .npy files: troupe's accuracy exactly, NumPy's logits.
  PredictOptions po;
  po.model = o.save_path;
  po.data = dir.file("x_test.npy") + "," + dir.file("y_test.npy");
  po.out = dir.file("predicted.npy");
  auto predicted = predict_local(po);
  INFO(predicted.status().to_string());
  REQUIRE(predicted.ok());
  CHECK(predicted->rows == 10000);
  CHECK(predicted->outputs == 10);
  CHECK(predicted->accuracy == trained->test_accuracy);
  run_numpy(dir.path(), R"PY(
p = np.load('predicted.npy'); a = np.load('numpy_logits.npy')
assert p.dtype == np.float32 and p.shape == (10000, 10), (p.dtype, p.shape)
open('logit_difference.txt', 'w').write(repr(float(np.abs(p - a).max() / np.abs(a).max())))
)PY");
  std::ifstream diff(dir.file("logit_difference.txt"));
  double logit_difference = 1;
  diff >> logit_difference;
  WARN("troupe predict's logits vs NumPy's forward pass: max |difference| / max |logit| = " << logit_difference);
  CHECK(logit_difference < 1e-5);

  // Fine-tuning: one more epoch from the file starts where the first ended, far above a fresh epoch.
  TrainOptions tune;
  tune.epochs = 1;
  tune.max_steps = 50;
  tune.init_from = o.save_path;
  double first_loss_tuned = 0, first_loss_fresh = 0;
  auto tuned = train_local(tune, [&](const TrainProgress& p) {
    if (p.step == 1 && !p.epoch_done) first_loss_tuned = p.loss;
  });
  REQUIRE(tuned.ok());
  TrainOptions fresh = tune;
  fresh.init_from.clear();
  auto from_scratch = train_local(fresh, [&](const TrainProgress& p) {
    if (p.step == 1 && !p.epoch_done) first_loss_fresh = p.loss;
  });
  REQUIRE(from_scratch.ok());
  CHECK(first_loss_tuned < 0.6);            // a trained model's loss (~0.4)
  CHECK(first_loss_fresh > 2.0);            // ln 10 = 2.30 at a fresh start
  CHECK(tuned->test_accuracy > from_scratch->test_accuracy + 0.05);
}

TEST_CASE("model file: written a range at a time (ModelWriter), in any order, it is save_model's file", "[data][model]") {
  TempDir dir;
  TrainOptions o;
  o.hidden = {32, 16};
  auto setup = set_up_trainer(o, DataSpec{784, 10}, 0, 1);
  REQUIRE(setup.ok());
  const size_t n = setup->space.size();
  std::vector<float> params(n);
  for (size_t i = 0; i < n; ++i) params[i] = 0.001f * static_cast<float>(i % 997) - 0.3f;
  const auto meta = model_metadata(o, DataSpec{784, 10}, "", setup->model, 10, 1, 0.5);
  for (DType dtype : {DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    REQUIRE(save_model(dir.file("whole.safetensors"), setup->space, params.data(), dtype, meta).ok());
    auto w = ModelWriter::create(dir.file("ranges.safetensors"), setup->space, dtype, meta);
    REQUIRE(w.ok());
    // Ranges that cut blocks anywhere, the last first.
    const std::vector<size_t> cuts = {0, 1000, 25120, 25121, 25200, 25700, n};
    for (size_t c = cuts.size() - 1; c-- > 0;)
      REQUIRE((*w)->write_range(cuts[c], params.data() + cuts[c], cuts[c + 1] - cuts[c]).ok());
    REQUIRE((*w)->commit().ok());
    CHECK(read_bytes(dir.file("ranges.safetensors")) == read_bytes(dir.file("whole.safetensors")));
  }
  auto partial = ModelWriter::create(dir.file("partial.safetensors"), setup->space, DType::f32, meta);
  REQUIRE(partial.ok());
  REQUIRE((*partial)->write_range(0, params.data(), n - 1).ok());  // one float short
  CHECK((*partial)->commit().code() == Code::internal);
  CHECK_FALSE(std::filesystem::exists(dir.file("partial.safetensors")));
}

TEST_CASE("model file: other shapes, other trainers and missing blocks are refused, and --init-partial loads what fits",
          "[data][model][errors]") {
  TempDir dir;
  TrainOptions o;
  o.hidden = {32};
  auto setup = set_up_trainer(o, DataSpec{784, 10}, 0, 1);
  REQUIRE(setup.ok());
  std::vector<float> params(setup->space.size(), 0.25f);
  REQUIRE(save_model(dir.file("small.safetensors"), setup->space, params.data(), DType::bf16,
                     model_metadata(o, DataSpec{784, 10}, "", setup->model, 10, 1, 0.5)).ok());
  auto f = data::read_safetensors(dir.file("small.safetensors"));
  REQUIRE(f.ok());
  CHECK(f->find("w0")->dtype == "BF16");

  TrainOptions other = o;
  other.hidden = {64};
  auto bigger = set_up_trainer(other, DataSpec{784, 10}, 0, 1);
  REQUIRE(bigger.ok());
  std::vector<float> into(bigger->space.size(), 0.0f);
  Status shape = load_model_into(dir.file("small.safetensors"), bigger->space, "mlp", false, into.data());
  CHECK(shape.message().find("tensor 'w0' is [784,32], the block is [784,64]") != std::string::npos);
  CHECK(std::all_of(into.begin(), into.end(), [](float v) { return v == 0; }));  // nothing loaded half

  Status trainer = load_model_into(dir.file("small.safetensors"), setup->space, "cnn", false, params.data());
  CHECK(trainer.message().find("a model of trainer 'mlp', not 'cnn'") != std::string::npos);

  // A file with the body only (w0, b0): the whole model refuses it, --init-partial loads the body.
  data::TensorFile body = *f;
  body.tensors.erase(std::remove_if(body.tensors.begin(), body.tensors.end(),
                                    [](const data::NamedTensor& t) { return t.name != "w0" && t.name != "b0"; }),
                     body.tensors.end());
  REQUIRE(body.tensors.size() == 2);
  REQUIRE(data::write_safetensors(dir.file("body.safetensors"), body).ok());
  std::vector<float> p(setup->space.size(), 0.0f);
  Status missing = load_model_into(dir.file("body.safetensors"), setup->space, "mlp", false, p.data());
  CHECK(missing.message().find("no tensor 'w1' for the block of that name") != std::string::npos);
  Status partial = load_model_into(dir.file("body.safetensors"), setup->space, "mlp", true, p.data());
  INFO(partial.to_string());
  CHECK(partial.ok());
  CHECK(p[0] == 0.25f);       // w0, rounded to bf16 and back: 0.25 exactly
  CHECK(p.back() == 0.0f);    // b1 kept

  // A --save into a folder that does not exist fails before training, not after.
  TrainOptions nowhere;
  nowhere.max_steps = 5;
  nowhere.save_path = dir.file("no/such/folder/m.safetensors");
  auto early = train_local(nowhere, {});
  REQUIRE_FALSE(early.ok());
  CHECK(early.status().message().find("cannot write into") != std::string::npos);
}

}  // namespace
}  // namespace troupe
