// The trained model leaves a real cluster, for every strategy: a job of 60 steps that checkpoints
// every 20 and saves with --save. Then, for sync, central, async and pipeline alike:
//   - the --save file loads, and its evaluation on the test split is the job's reported accuracy;
//   - `troupe export JOB` (the GCS's manifests) takes the newest checkpoint, the final one, and
//     writes the same tensors byte for byte as --save (two paths: the consolidated shard files,
//     and the parameters the job held at its end);
//   - once the cluster is down, `troupe export CHECKPOINT_DIR --step S` of an older checkpoint
//     writes the tensors one process's save_model writes for those shard files put together.
// And a job of a user's trainer library: export JOB fetches the library from the GCS; a directory
// needs it given with --lib.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "core/config.h"
#include "data/safetensors.h"
#include "tests/cluster/cluster_fixture.h"
#include "trainers/checkpoint/shard_file.h"
#include "data/data_source.h"
#include "trainers/setup/model_file.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe::testing;
namespace fs = std::filesystem;

namespace {

// Same tensor names, dtypes, shapes and bytes (metadata may differ: the step, the source).
void require_same_tensors(const std::string& a, const std::string& b) {
  auto fa = troupe::data::read_safetensors(a);
  auto fb = troupe::data::read_safetensors(b);
  INFO(a << " vs " << b);
  REQUIRE(fa.ok());
  REQUIRE(fb.ok());
  REQUIRE(fa->tensors.size() == fb->tensors.size());
  for (size_t i = 0; i < fa->tensors.size(); ++i) {
    INFO(fa->tensors[i].name);
    CHECK(fa->tensors[i].name == fb->tensors[i].name);
    CHECK(fa->tensors[i].dtype == fb->tensors[i].dtype);
    CHECK(fa->tensors[i].shape == fb->tensors[i].shape);
    CHECK(fa->tensors[i].bytes == fb->tensors[i].bytes);
  }
}

// The test split the jobs evaluate on (the built-in Fashion-MNIST), and the job's trainer: the MLP
// with troupe's default settings.
troupe::TrainOptions default_mlp() {
  troupe::TrainOptions o;
  auto cfg = troupe::Config::from_environment();
  REQUIRE(cfg.ok());
  o.dataset_dir = cfg->dataset_dir;
  return o;
}

// The accuracy of the model file `path` on the test split, evaluated in this process.
double evaluate(const std::string& path) {
  const troupe::TrainOptions o = default_mlp();
  auto data = troupe::load_train_data(o);
  REQUIRE(data.ok());
  auto setup = troupe::set_up_trainer(o, troupe::DataSpec{data->test->features(), data->test->classes}, 0, 1);
  REQUIRE(setup.ok());
  std::vector<float> params(setup->space.size());
  troupe::Status loaded = troupe::load_model_into(path, setup->space, "mlp", false, params.data());
  INFO(loaded.to_string());
  REQUIRE(loaded.ok());
  auto correct = troupe::count_correct(*setup->trainer, troupe::Parameters(params.data(), params.size()), *data->test,
                                       0, data->test->count);
  REQUIRE(correct.ok());
  return static_cast<double>(*correct) / static_cast<double>(data->test->count);
}

// What one process writes for the checkpoint in `step_dir`: its shard files read one by one and
// put together by the ranges their headers name, then save_model.
std::string one_process_file(const std::string& step_dir, const std::string& out) {
  std::vector<std::string> shards;
  for (const auto& e : fs::directory_iterator(step_dir))
    if (e.path().extension() == ".ckpt") shards.push_back(e.path().string());
  REQUIRE_FALSE(shards.empty());
  const troupe::TrainOptions o = default_mlp();
  auto setup = troupe::set_up_trainer(o, troupe::DataSpec{784, 10}, 0, 1);
  REQUIRE(setup.ok());
  std::vector<float> params(setup->space.size());
  size_t covered = 0;
  for (const std::string& path : shards) {
    auto shard = troupe::checkpoint::read_shard_file(path);
    INFO(path);
    REQUIRE(shard.ok());
    REQUIRE(shard->header.total_floats == params.size());
    std::copy(shard->params.begin(), shard->params.end(), params.begin() + static_cast<std::ptrdiff_t>(shard->header.begin));
    covered += shard->header.end - shard->header.begin;
  }
  REQUIRE(covered == params.size());
  REQUIRE(troupe::save_model(out, setup->space, params.data(), troupe::DType::f32, {}).ok());
  return out;
}

// The job of `strategy` (`args`: its workers, servers, stages) as the file comment says. Async
// checkpoints count versions (updates of every worker: 2 per step), the others steps.
void model_leaves_the_cluster(const std::string& strategy, const std::string& args) {
  const int64_t per_step = strategy == "async" ? 2 : 1;
  ClusterFixture c;
  c.up("--nodes 1 --cpus 4");
  const std::string ckpt = c.home() + "/ckpt", saved = c.home() + "/saved.safetensors";
  auto run = c.troupe("submit --strategy " + strategy + " " + args + " --epochs 1 --max-steps 60 --batch-size 64 "
                      "--checkpoint-every 20 --checkpoint-dir " + ckpt + " --save " + saved + " --json --no-progress",
                      240);
  INFO(run.both() << c.logs_tail());
  REQUIRE(run.exit_code == 0);
  const Json summary = Json::parse(run.last_line());
  const std::string job = summary.at("job_id").get<std::string>();
  const double reported = summary.at("test_accuracy").get<double>();

  // --save: a file any loader takes, whose evaluation is what the job reported (at most 2 of
  // 10,000 test images apart: a pipeline's stages evaluate layer by layer, in other chunks).
  const double evaluated = evaluate(saved);
  WARN(strategy << ": the job reported test accuracy " << reported << ", its --save file evaluates to " << evaluated);
  CHECK(std::fabs(evaluated - reported) <= 2e-4);
  CHECK(reported > 0.5);  // 60 steps of the MLP train it well past chance

  // export JOB: the newest checkpoint is the final one, so its tensors are --save's.
  const std::string exported = c.home() + "/exported.safetensors";
  auto e = c.troupe("export " + job.substr(0, 8) + " --out " + exported + " --json", 60);
  INFO(e.both());
  REQUIRE(e.exit_code == 0);
  const Json report = Json::parse(e.last_line());
  CHECK(report.at("step") == 60 * per_step);
  CHECK(report.at("strategy") == strategy);
  CHECK(report.at("skipped").empty());
  require_same_tensors(exported, saved);
  require_same_tensors(exported, one_process_file(report.at("checkpoint").get<std::string>(),
                                                  c.home() + "/reference.safetensors"));

  // No cluster: the checkpoint directory alone, an older step.
  auto down = c.troupe("down", 60);
  REQUIRE(down.exit_code == 0);
  const std::string older = c.home() + "/older.safetensors";
  auto d = c.troupe("export " + ckpt + "/" + job + " --step " + std::to_string(40 * per_step) + " --out " + older +
                    " --json", 60);
  INFO(d.both());
  REQUIRE(d.exit_code == 0);
  const Json dir_report = Json::parse(d.last_line());
  CHECK(dir_report.at("step") == 40 * per_step);
  CHECK(dir_report.at("job_id") == job);
  require_same_tensors(older, one_process_file(dir_report.at("checkpoint").get<std::string>(),
                                               c.home() + "/older-reference.safetensors"));
  auto meta = troupe::data::read_safetensors(older);
  REQUIRE(meta.ok());
  CHECK(meta->metadata.at("troupe.step") == std::to_string(40 * per_step));
  CHECK(meta->metadata.at("troupe.strategy") == strategy);
}

}  // namespace

TEST_CASE("export and --save: a sync job's checkpoints and final model", "[export][cluster][sync]") {
  model_leaves_the_cluster("sync", "--workers 2");
}

TEST_CASE("export and --save: a sharded sync job's (--shard parameters) checkpoints and final model",
          "[export][cluster][sharded]") {
  // Each worker holds 1/2 of the parameters; its checkpoint shards are written in the unsharded
  // layout, so export reads them as a plain sync job's.
  model_leaves_the_cluster("sync", "--workers 2 --shard parameters");
}

TEST_CASE("export and --save: a central job's checkpoints and final model", "[export][cluster][central]") {
  model_leaves_the_cluster("central", "--workers 2");
}

TEST_CASE("export and --save: an async job's server ranges and final model", "[export][cluster][async]") {
  model_leaves_the_cluster("async", "--workers 2 --ps 2");
}

TEST_CASE("export and --save: a pipeline's stage shards and final model", "[export][cluster][pipeline]") {
  model_leaves_the_cluster("pipeline", "--stages 2 --workers 2 --microbatches 2");
}

TEST_CASE("export: a job of a user's trainer (--lib): export JOB fetches the library from the GCS, a directory needs "
          "--lib", "[export][cluster][lib]") {
  const std::string lib = std::string(TROUPE_TEST_FIXTURE_DIR) + "/libtest_constant_trainer.so";  // "fixture-mean"
  ClusterFixture c;
  c.up("--nodes 1 --cpus 2");
  const std::string ckpt = c.home() + "/ckpt", saved = c.home() + "/saved.safetensors";
  auto run = c.troupe("submit --lib " + lib + " --trainer fixture-mean --workers 2 --epochs 1 --max-steps 20 "
                      "--batch-size 64 --checkpoint-every 10 --checkpoint-dir " + ckpt + " --save " + saved +
                      " --json --no-progress", 240);
  INFO(run.both() << c.logs_tail());
  REQUIRE(run.exit_code == 0);
  const std::string job = Json::parse(run.last_line()).at("job_id").get<std::string>();
  const std::string exported = c.home() + "/exported.safetensors";
  auto e = c.troupe("export " + job.substr(0, 8) + " --out " + exported + " --json", 60);
  INFO(e.both());
  REQUIRE(e.exit_code == 0);
  CHECK(Json::parse(e.last_line()).at("trainer") == "fixture-mean");
  require_same_tensors(exported, saved);

  auto unnamed = c.troupe("export " + ckpt + "/" + job + " --out " + exported, 60);
  CHECK(unnamed.exit_code == 2);
  CHECK(unnamed.err.find("comes from library libtest_constant_trainer.so (xxh64 ") != std::string::npos);
  CHECK(unnamed.err.find("give that library with --lib PATH") != std::string::npos);
  auto given = c.troupe("export " + ckpt + "/" + job + " --lib " + lib + " --out " + exported, 60);
  INFO(given.both());
  CHECK(given.exit_code == 0);
  require_same_tensors(exported, saved);
}
