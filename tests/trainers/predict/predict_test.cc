// troupe predict in one process (trainers/predict/predict.h): a regression model trained on normalised
// inputs predicts its validation set with the very error its training reported (the trainer, the
// loss and the normalisation all from the file's metadata), the CLI's JSON, and refusals.
#include <catch2/catch.hpp>

#include "tests/data/numpy_fixture.h"
#include "tests/support/run_command.h"
#include "trainers/local/local_trainer.h"
#include "trainers/setup/model_file.h"
#include "trainers/setup/trainer_setup.h"
#include "trainers/predict/predict.h"

namespace troupe {
namespace {

using troupe::testing::run_command;
using troupe::testing::run_numpy;
using troupe::testing::TempDir;

TEST_CASE("predict: a normalised regression model's validation error, from its file alone", "[data][predict]") {
  TempDir dir;
  run_numpy(dir.path(), R"PY(
os.mkdir('data'); os.chdir('data')
rng = np.random.default_rng(12)
A = rng.normal(0, 1, (3, 2))
for split, n in (('train', 3000), ('val', 700)):
    x = rng.normal(50, 10, (n, 3)).astype(np.float32)
    np.save('x_%s.npy' % split, x); np.save('y_%s.npy' % split, ((x - 50) / 10 @ A).astype(np.float32))
)PY");
  TrainOptions o;
  const std::string data = dir.file("data");
  o.data = data;
  o.loss = "mse";
  o.normalize = "standard";
  o.hidden = {16};
  o.epochs = 4;
  o.lr = 0.01f;
  o.save_path = dir.file("m.safetensors");
  auto trained = train_local(o, {});
  INFO(trained.status().to_string());
  REQUIRE(trained.ok());

  PredictOptions p;
  p.model = o.save_path;
  p.data = data;
  p.split = "val";
  p.out = dir.file("p.npy");
  p.batch_size = 64;  // other chunks than evaluation's: the same sums per row
  auto r = predict_local(p);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  CHECK(r->rows == 700);
  CHECK(r->outputs == 2);
  CHECK(r->accuracy == -1);
  CHECK(r->mse == Approx(trained->test_loss).epsilon(1e-5));
  CHECK(r->mse < 0.3);  // (predicting the mean: about 3)

  // The CLI: the same, as one JSON object; NumPy reads the outputs in the data's order.
  auto cli = run_command(troupe::testing::troupe_binary() + " predict --model " + o.save_path + " --data " + data +
                             " --split val --out " + dir.file("q.npy") + " --json",
                         120);
  INFO(cli.both());
  REQUIRE(cli.exit_code == 0);
  CHECK(cli.last_line().find("\"mse\":") != std::string::npos);
  run_numpy(dir.path(), R"PY(
p = np.load('q.npy'); y = np.load('data/y_val.npy')
assert p.shape == (700, 2), p.shape
assert float(((p - y) ** 2).mean()) < 0.3
)PY");

  SECTION("data without the target: outputs of the trained width, nothing scored") {
    run_numpy(dir.path(), "os.mkdir('bare'); np.save('bare/x.npy', np.load('data/x_val.npy')[:50])");
    PredictOptions bare = p;
    bare.data = dir.file("bare");
    bare.split.clear();
    auto b = predict_local(bare);
    INFO(b.status().to_string());
    REQUIRE(b.ok());
    CHECK(b->rows == 50);
    CHECK(b->outputs == 2);
    CHECK(b->mse == -1);
    CHECK(b->accuracy == -1);
  }
  SECTION("refusals name what is wrong") {
    PredictOptions bad = p;
    bad.split = "test";
    CHECK(predict_local(bad).status().message().find("no split 'test' (splits: train, val)") != std::string::npos);
    bad = p;
    bad.split.clear();
    CHECK(predict_local(bad).status().message().find("say which to predict with --split") != std::string::npos);
    bad = p;
    bad.inputs = {"z"};
    CHECK(predict_local(bad).status().message().find("no field 'z'") != std::string::npos);
    bad = p;
    bad.model = dir.file("absent.safetensors");
    CHECK(predict_local(bad).status().message().find("absent.safetensors") != std::string::npos);
    run_numpy(dir.path(), R"PY(
import json, struct
h = json.dumps({'w': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}).encode()
open('foreign.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b'\0\0\0\0')
)PY");
    bad = p;
    bad.model = dir.file("foreign.safetensors");
    CHECK(predict_local(bad).status().message().find("not a model troupe saved") != std::string::npos);
    // A model of token windows (its metadata says --seq-len) without a vocabulary: refused, not fed
    // one id per example.
    TrainOptions windows = o;
    windows.seq_len = 8;
    auto setup = set_up_trainer(o, DataSpec{3, 0, 2}, 0, 1);
    REQUIRE(setup.ok());
    std::vector<float> params(setup->space.size(), 0.0f);
    REQUIRE(save_model(dir.file("windows.safetensors"), setup->space, params.data(), DType::f32,
                       model_metadata(windows, DataSpec{3, 0, 2}, "", setup->model, 1, 1, -1))
                .ok());
    bad = p;
    bad.model = dir.file("windows.safetensors");
    INFO(predict_local(bad).status().to_string());
    CHECK(predict_local(bad).status().message().find("--seq-len 8 token windows but its metadata holds no "
                                                     "vocabulary") != std::string::npos);
    // A language model's (a vocabulary of 16) over data of several fields: which one is the stream?
    REQUIRE(save_model(dir.file("lm.safetensors"), setup->space, params.data(), DType::f32,
                       model_metadata(windows, DataSpec{3, 16, 1}, "", setup->model, 1, 1, -1))
                .ok());
    bad.model = dir.file("lm.safetensors");
    CHECK(predict_local(bad).status().message().find("reads one token stream: name it with --inputs FIELD") !=
          std::string::npos);
    // A model trained on normalised inputs whose file lost the statistics: refused.
    auto meta = model_metadata(o, DataSpec{3, 0, 2}, "", setup->model, 1, 1, -1);
    REQUIRE(meta.count("troupe.normalize") == 1);
    REQUIRE(save_model(dir.file("unnormalised.safetensors"), setup->space, params.data(), DType::f32, meta).ok());
    bad.model = dir.file("unnormalised.safetensors");
    CHECK(predict_local(bad).status().message().find("does not carry the statistics") != std::string::npos);
  }
}

}  // namespace
}  // namespace troupe
