// `troupe export` without a cluster (trainers/export/): checkpoint directories of every layout of
// shards come back as the file save_model writes for the same parameters in one process; the
// newest intact checkpoint by default, --step for another; damaged, missing and wrong input are
// errors naming what and where. The real jobs' checkpoints: export_cluster_test.cc.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "data/safetensors.h"
#include "tests/core/temp_dir.h"
#include "tests/export/checkpoint_fixture.h"
#include "tests/support/run_command.h"
#include "trainers/export/model_export.h"
#include "trainers/setup/model_file.h"

namespace troupe {
namespace {

namespace fs = std::filesystem;
using testing::FakeJob;
using testing::TempDir;

// save_model's file of `params` for the fixture's trainer: what one process writes.
std::string reference_file(const FakeJob& j, const std::vector<float>& params, const std::string& path,
                           DType dtype = DType::f32) {
  auto setup = set_up_trainer(j.spec.train, j.data, 0, 1);
  REQUIRE(setup.ok());
  REQUIRE(save_model(path, setup->space, params.data(), dtype, {}).ok());
  return path;
}

// Both files hold the same tensors: names, dtypes, shapes and bytes.
void require_same_tensors(const std::string& a, const std::string& b) {
  auto fa = data::read_safetensors(a);
  auto fb = data::read_safetensors(b);
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

Expected<exporting::ExportResult> export_dir(const std::string& dir, const std::string& out, int64_t step = -1,
                                             DType dtype = DType::f32) {
  auto src = exporting::source_from_directory(dir);
  if (!src.ok()) return src.status();
  exporting::ExportOptions o;
  o.out = out;
  o.step = step;
  o.dtype = dtype;
  return exporting::export_model(*src, o);
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x20));
}

bool contains(const Status& st, const std::string& text) { return st.message().find(text) != std::string::npos; }

TEST_CASE("export: shards in any layout (replica slices, server ranges across blocks, stages, one server) give "
          "one process's model file", "[export]") {
  TempDir tmp;
  FakeJob j(tmp.path());
  j.describe();
  const size_t n = j.total;
  // 0: sync's 2 slices; 10: 3 uneven ranges, cutting blocks; 20: one shard; 30: stage ranges at
  // block boundaries (the first layer alone, then the rest).
  j.checkpoint(10, {0, n / 7, n / 2 + 3, n});
  j.checkpoint(20, {0, n});
  j.checkpoint(30, {0, 784 * 16 + 16, n});
  j.checkpoint(40, j.slices(2));
  for (int64_t step : {10, 20, 30, 40}) {
    INFO("step " << step);
    const std::string out = tmp.file("export-" + std::to_string(step) + ".safetensors");
    auto r = export_dir(j.dir(), out, step);
    INFO(r.status().to_string());
    REQUIRE(r.ok());
    CHECK(r->step == step);
    CHECK(r->parameters == n);
    require_same_tensors(out, reference_file(j, testing::step_params(n, step), tmp.file("ref.safetensors")));
    auto f = data::read_safetensors(out);
    REQUIRE(f.ok());
    CHECK(f->metadata.at(kModelTrainer) == "mlp");
    CHECK(f->metadata.at("troupe.step") == std::to_string(step));
    CHECK(f->metadata.at("troupe.job") == j.job.hex());
    CHECK(f->metadata.at("troupe.strategy") == "sync");
    CHECK(f->metadata.at("troupe.hidden") == "16,8");
  }
  // bf16 rounds as save_model does; a directory moved elsewhere (copied off the cluster) still reads.
  const std::string moved = tmp.file("moved");
  fs::copy(j.dir(), moved, fs::copy_options::recursive);
  fs::remove_all(j.dir());
  auto r = export_dir(moved, tmp.file("bf16.safetensors"), -1, DType::bf16);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  CHECK(r->step == 40);
  CHECK(r->checkpoint_dir == moved + "/step-000000000040");
  require_same_tensors(tmp.file("bf16.safetensors"),
                       reference_file(j, testing::step_params(n, 40), tmp.file("ref16.safetensors"), DType::bf16));
}

TEST_CASE("export: the newest intact checkpoint by default (damaged ones skipped and named), --step for another",
          "[export]") {
  TempDir tmp;
  FakeJob j(tmp.path(), "async");
  j.describe();
  for (int64_t step : {10, 20, 30}) j.checkpoint(step, j.slices(2));
  const std::string out = tmp.file("m.safetensors");

  auto newest = export_dir(j.dir(), out);
  REQUIRE(newest.ok());
  CHECK(newest->step == 30);
  CHECK(newest->skipped.empty());
  auto older = export_dir(j.dir(), out, 10);
  REQUIRE(older.ok());
  CHECK(older->step == 10);
  require_same_tensors(out, reference_file(j, testing::step_params(j.total, 10), tmp.file("ref.safetensors")));
  auto step_dir = export_dir(j.dir() + "/step-000000000020/", out);  // a step directory: that step
  REQUIRE(step_dir.ok());
  CHECK(step_dir->step == 20);
  auto contradicts = export_dir(j.dir() + "/step-000000000020", out, 10);
  CHECK(contradicts.status().code() == Code::invalid_argument);
  CHECK(contradicts.status().message().find("--step 10 contradicts") != std::string::npos);

  auto unknown = export_dir(j.dir(), out, 25);
  CHECK(unknown.status().code() == Code::not_found);
  CHECK(contains(unknown.status(), "has no checkpoint of step 25; its checkpoints are of steps 10, 20, 30"));

  // Step 30's second shard damaged: the default takes 20 and names why 30 was skipped; asking for
  // 30 is an error naming the file. A step directory whose commit never happened (no manifest) too.
  const std::string shard = j.dir() + "/step-000000000030/shard-1-of-2.ckpt";
  flip_byte(shard, 100);
  fs::create_directories(j.dir() + "/step-000000000040");  // a checkpoint being written
  auto skipped = export_dir(j.dir(), out);
  INFO(skipped.status().to_string());
  REQUIRE(skipped.ok());
  CHECK(skipped->step == 20);
  REQUIRE(skipped->skipped.size() == 2);
  CHECK(skipped->skipped[0].find("step 40: ") == 0);
  CHECK(skipped->skipped[0].find("has no MANIFEST.trpm (its checkpoint was never committed)") != std::string::npos);
  CHECK(skipped->skipped[1].find("step 30: ") == 0);
  CHECK(skipped->skipped[1].find(shard) != std::string::npos);
  require_same_tensors(out, reference_file(j, testing::step_params(j.total, 20), tmp.file("ref.safetensors")));

  auto damaged = export_dir(j.dir(), out, 30);
  CHECK(damaged.status().code() == Code::corrupt_data);
  CHECK(contains(damaged.status(), "the checkpoint of step 30"));
  CHECK(contains(damaged.status(), shard));

  // A damaged manifest: skipped by default, an error naming it when asked for.
  const std::string manifest = j.dir() + "/step-000000000020/MANIFEST.trpm";
  flip_byte(manifest, 20);
  auto falls_back = export_dir(j.dir(), out);
  REQUIRE(falls_back.ok());
  CHECK(falls_back->step == 10);
  auto bad_manifest = export_dir(j.dir(), out, 20);
  CHECK(bad_manifest.status().code() == Code::corrupt_data);
  CHECK(contains(bad_manifest.status(), manifest));

  // Nothing intact left: not_found, every skipped checkpoint named.
  flip_byte(j.dir() + "/step-000000000010/shard-0-of-2.ckpt", 90);
  auto none = export_dir(j.dir(), out);
  CHECK(none.status().code() == Code::not_found);
  CHECK(contains(none.status(), "no intact checkpoint among 4"));
  CHECK(contains(none.status(), j.dir() + "/step-000000000010/shard-0-of-2.ckpt"));
}

TEST_CASE("export: bad input is an error naming what and where", "[export][errors]") {
  TempDir tmp;
  const std::string out = tmp.file("m.safetensors");

  auto missing = export_dir(tmp.file("nowhere"), out);
  CHECK(missing.status().code() == Code::not_found);
  CHECK(contains(missing.status(), "checkpoint directory " + tmp.file("nowhere") + " does not exist"));

  fs::create_directories(tmp.file("plain/sub"));
  auto plain = export_dir(tmp.file("plain"), out);
  CHECK(plain.status().code() == Code::invalid_argument);
  CHECK(contains(plain.status(), tmp.file("plain") + " is not a checkpoint directory"));

  // The --checkpoint-dir of two jobs: name one of them.
  FakeJob a(tmp.file("root")), b(tmp.file("root"));
  a.describe();
  b.describe();
  auto root = export_dir(tmp.file("root"), out);
  CHECK(root.status().code() == Code::invalid_argument);
  CHECK(contains(root.status(), "is a --checkpoint-dir of 2 job(s): give one job's directory"));
  CHECK(contains(root.status(), a.dir()));

  // A job that has not checkpointed yet.
  auto none = export_dir(a.dir(), out);
  CHECK(none.status().code() == Code::not_found);
  CHECK(contains(none.status(), "has no checkpoint yet"));

  // No JOB.json (written before troupe described jobs beside their checkpoints), or a damaged one.
  a.checkpoint(10, a.slices(2));
  fs::remove(a.dir() + "/JOB.json");
  auto undescribed = export_dir(a.dir(), out);
  CHECK(undescribed.status().code() == Code::not_found);
  CHECK(contains(undescribed.status(), "no JOB.json in " + a.dir()));
  { std::ofstream(a.dir() + "/JOB.json") << "{\"format\": 1, \"job\": 7}"; }
  auto garbled = export_dir(a.dir(), out);
  CHECK(garbled.status().code() == Code::corrupt_data);
  CHECK(contains(garbled.status(), a.dir() + "/JOB.json"));

  // Settings that set up another layout than the checkpoint's (another --hidden): not "damaged".
  FakeJob other = a;
  other.spec.train.hidden = {32};
  fs::remove(a.dir() + "/JOB.json");
  other.describe();
  auto layout = export_dir(a.dir(), out);
  CHECK(layout.status().code() == Code::invalid_argument);
  CHECK(contains(layout.status(), "holds a model of " + std::to_string(a.total) + " parameters"));

  // The output's folder is checked before anything is read.
  auto nowhere = export_dir(b.dir(), tmp.file("no/such/folder/m.safetensors"));
  CHECK(nowhere.status().code() == Code::invalid_argument);
  CHECK(contains(nowhere.status(), "--out " + tmp.file("no/such/folder/m.safetensors") + ": cannot write into"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("export: a user's trainer comes from its library (--lib), and without it the library is named",
          "[export][lib]") {
  TempDir tmp;
  FakeJob j(tmp.path());
  j.spec.train.model = "fixture-mean";  // tests/trainers/fixtures/constant_trainer.cc: one block "bias" [classes]
  j.spec.library = "00112233aabbccdd";
  j.total = 10;
  j.describe("libtest_constant_trainer.so");
  j.checkpoint(10, {0, 10});
  auto src = exporting::source_from_directory(j.dir());
  REQUIRE(src.ok());
  exporting::ExportOptions o;
  o.out = tmp.file("m.safetensors");
  auto unnamed = exporting::export_model(*src, o);
  CHECK(unnamed.status().code() == Code::invalid_argument);
  CHECK(contains(unnamed.status(), "trainer 'fixture-mean' of " + j.dir() + " comes from library "
                                   "libtest_constant_trainer.so (xxh64 00112233aabbccdd): give that library with --lib PATH"));
  o.library = std::string(TROUPE_TEST_FIXTURE_DIR) + "/libtest_constant_trainer.so";
  auto r = exporting::export_model(*src, o);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  CHECK(r->trainer == "fixture-mean");
  auto f = data::read_safetensors(o.out);
  REQUIRE(f.ok());
  REQUIRE(f->tensors.size() == 1);
  CHECK(f->tensors[0].name == "bias");
  CHECK(f->tensors[0].shape == std::vector<int64_t>{10});
  const std::vector<float> want = testing::step_params(10, 10);
  CHECK(std::memcmp(f->tensors[0].bytes.data(), want.data(), 40) == 0);
}

TEST_CASE("troupe export CHECKPOINT_DIR needs no cluster: the file, its JSON report, and errors on stderr",
          "[export][cli]") {
  TempDir tmp, home;
  FakeJob j(tmp.path(), "pipeline");
  j.describe();
  j.checkpoint(10, {0, 784 * 16 + 16, j.total});
  const std::string troupe = "env TROUPE_HOME=" + home.path() + " " + std::string(TROUPE_BINARY_DIR) + "/bin/troupe";
  auto ok = testing::run_command(troupe + " export " + j.dir() + " --out " + tmp.file("m.safetensors") + " --json", 60);
  INFO(ok.both());
  REQUIRE(ok.exit_code == 0);
  auto report = nlohmann::json::parse(ok.last_line());
  CHECK(report.at("step") == 10);
  CHECK(report.at("shards") == 2);
  CHECK(report.at("strategy") == "pipeline");
  CHECK(report.at("job_id") == j.job.hex());
  CHECK(report.at("parameters") == j.total);
  require_same_tensors(tmp.file("m.safetensors"),
                       reference_file(j, testing::step_params(j.total, 10), tmp.file("ref.safetensors")));

  auto unknown = testing::run_command(troupe + " export " + j.dir() + " --out " + tmp.file("x.safetensors") +
                                      " --step 7", 60);
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("troupe export: error: not_found: " + j.dir() + " has no checkpoint of step 7; its "
                         "checkpoints are of steps 10") != std::string::npos);
  // A job id with no cluster up: it says so, and what to give instead.
  auto no_cluster = testing::run_command(troupe + " export " + j.job.short_hex() + " --out " + tmp.file("x.safetensors"), 60);
  CHECK(no_cluster.exit_code == 1);
  CHECK(no_cluster.err.find("needs the cluster that ran the job (or give the job's checkpoint directory)") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(tmp.file("x.safetensors")));
}

}  // namespace
}  // namespace troupe
