// `troupe train` end to end: the real binary on the real Fashion-MNIST files, as a user runs it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/device.h"
#include "tests/core/temp_dir.h"
#include "tests/support/run_command.h"

using troupe::testing::CommandResult;
using troupe::testing::run_command;
using troupe::testing::troupe_binary;
namespace fs = std::filesystem;

namespace {
const char* kDataset = TROUPE_DEFAULT_DATASET_DIR;

CommandResult train(const std::string& args) {
  return run_command("TROUPE_LOG_DIR=/tmp/troupe-test-logs " + troupe_binary() + " train --no-progress " + args);
}

// A copy of the dataset directory whose training images are cut to `keep` bytes.
fs::path dataset_with_truncated_images(size_t keep) {
  fs::path dir = fs::temp_directory_path() / ("troupe-cli-trunc-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kDataset)) {
    fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
  }
  fs::resize_file(dir / "train-images-idx3-ubyte.gz", keep);
  return dir;
}
}  // namespace

TEST_CASE("troupe train reaches the documented accuracy with the defaults", "[cli][train][slow]") {
  // README command 1 trains this model: MLP 784-256-128-10, one CPU worker, 10 epochs.
  CommandResult r = train("--model mlp --hidden 256,128 --epochs 10 --json");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.last_line());
  CHECK(j.at("epochs") == 10);
  CHECK(j.at("test_accuracy").get<double>() >= 0.885);
  CHECK(j.at("final_loss").get<double>() < 0.35);
  CHECK(j.at("samples_per_second").get<double>() > 0);
  CHECK(j.at("wall_seconds").get<double>() > 0);
  CHECK(j.at("history").size() == 10);
  CHECK(r.out.find("test accuracy") != std::string::npos);
}

TEST_CASE("troupe train --precision bf16 and f16 reach the f32 accuracy with f32 master weights", "[cli][train][slow]") {
  for (const char* p : {"bf16", "f16"}) {
    CommandResult r = train(std::string("--epochs 10 --json --precision ") + p);
    INFO(p << ": " << r.both());
    REQUIRE(r.exit_code == 0);
    auto j = nlohmann::json::parse(r.last_line());
    CHECK(j.at("precision") == p);
    CHECK(j.at("test_accuracy").get<double>() >= 0.885);
    CHECK(r.out.find(std::string("precision ") + p + " (f32 master weights)") != std::string::npos);
    if (std::string(p) == "f16") {
      // The scaler starts at 2^16 and settles: a few overflowing steps are skipped, not thousands.
      CHECK(j.at("loss_scale").get<double>() >= 1.0);
      CHECK(j.at("overflow_steps").get<int64_t>() < 50);
    }
  }
}

TEST_CASE("troupe train --json prints one JSON object as its last line", "[cli][train]") {
  CommandResult r = train("--epochs 1 --max-steps 20 --json");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.last_line());
  for (const char* key : {"test_accuracy", "final_loss", "samples_per_second", "epochs", "wall_seconds"}) {
    CHECK(j.contains(key));
  }
  CHECK(j.at("steps") == 20);
  CHECK(j.at("device") == "cpu");
}

TEST_CASE("troupe train is deterministic for a seed", "[cli][train]") {
  CommandResult a = train("--epochs 1 --max-steps 30 --seed 7 --json");
  CommandResult b = train("--epochs 1 --max-steps 30 --seed 7 --json");
  CommandResult c = train("--epochs 1 --max-steps 30 --seed 8 --json");
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  REQUIRE(c.exit_code == 0);
  auto ja = nlohmann::json::parse(a.last_line()), jb = nlohmann::json::parse(b.last_line()),
       jc = nlohmann::json::parse(c.last_line());
  CHECK(ja.at("final_loss") == jb.at("final_loss"));
  CHECK(ja.at("test_accuracy") == jb.at("test_accuracy"));
  CHECK(ja.at("final_loss") != jc.at("final_loss"));
}

TEST_CASE("troupe train refuses bad flag values with a usage error naming the flag", "[cli][train][errors]") {
  struct Case {
    const char* args;
    const char* mentions;
  };
  const Case cases[] = {
      {"--epochs 0", "--epochs"},
      {"--epochs many", "--epochs"},
      {"--batch-size -5", "--batch-size"},
      {"--batch-size 0", "--batch-size"},
      {"--optimizer rmsprop", "--optimizer"},
      {"--lr -1", "--lr"},
      {"--lr 0", "--lr"},
      {"--hidden 256,abc", "--hidden"},
      {"--hidden 256,,128", "--hidden"},
      {"--hidden 0", "--hidden"},
      {"--model resnet", "--model"},
      {"--dataset cifar", "--dataset"},
      {"--lr-schedule step", "--lr-schedule"},
      {"--momentum 1.5 --optimizer sgd", "--momentum"},
      {"--device tpu", "tpu"},
      {"--precision f64", "--precision"},
      {"--precision f16 --loss-scale 0.5", "--loss-scale"},
      {"--precision bf16 --strategy pipeline --stages 2", "--precision"},
      {"--frobnicate", "frobnicate"},
      {"--set no_such_setting=1", "no_such_setting"},
      {"--set cpu_threads=lots", "cpu_threads"},
  };
  for (const Case& c : cases) {
    // --set is a global option: it goes before the subcommand.
    std::string args = c.args;
    CommandResult r = args.rfind("--set", 0) == 0
                          ? run_command(troupe_binary() + " " + args + " train --no-progress --epochs 1")
                          : train(args);
    INFO(c.args << " -> exit " << r.exit_code << ": " << r.both());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(c.mentions) != std::string::npos);
  }
}

TEST_CASE("troupe train names the missing dataset and what to do", "[cli][train][errors]") {
  CommandResult r = train("--dataset-dir /nonexistent/fashion");
  INFO(r.both());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("/nonexistent/fashion") != std::string::npos);
  CHECK(r.err.find("train-images-idx3-ubyte.gz") != std::string::npos);
  CHECK(r.err.find("dataset-fashion-mnist") != std::string::npos);
}

TEST_CASE("troupe train names a truncated dataset file", "[cli][train][errors]") {
  fs::path dir = dataset_with_truncated_images(1 << 20);
  CommandResult r = train("--dataset-dir " + dir.string());
  fs::remove_all(dir);
  INFO(r.both());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("train-images-idx3-ubyte.gz") != std::string::npos);
  CHECK(r.err.find("corrupt_data") != std::string::npos);
}

TEST_CASE("troupe train stops on a non-finite loss and names the step", "[cli][train][errors]") {
  CommandResult r = train("--optimizer sgd --lr 100000 --epochs 1");
  INFO(r.both());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("numeric_error") != std::string::npos);
  CHECK(r.err.find("epoch 1, step") != std::string::npos);
  CHECK(r.out.find("test accuracy") == std::string::npos);  // no result is reported for a failed job
}

TEST_CASE("troupe train --device cuda without a usable GPU says why", "[cli][train][errors]") {
  std::string why;
  if (troupe::cuda_device_count(&why) > 0) {
    WARN("SKIPPED: a CUDA device is visible here, so the no-GPU error path cannot be exercised");
    return;
  }
  CommandResult r = train("--device cuda --epochs 1");
  INFO(r.both());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("unavailable") != std::string::npos);
  CHECK(r.err.find("--device cpu") != std::string::npos);
}

TEST_CASE("on a terminal troupe train draws a progress bar with loss, speed and ETA", "[cli][train]") {
  // `script` (util-linux) gives the command a pseudo-terminal, as a person's shell would.
  CommandResult r = run_command("TROUPE_LOG_DIR=/tmp/troupe-test-logs script -qfec \"" + troupe_binary() +
                                " train --epochs 1 --max-steps 200\" /dev/null");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("epoch 1/1 [") != std::string::npos);
  CHECK(r.out.find("samples/s") != std::string::npos);
  CHECK(r.out.find("ETA") != std::string::npos);
  CHECK(r.out.find("test accuracy") != std::string::npos);
}

TEST_CASE("troupe train --lib trains a trainer from a library", "[cli][train][lib]") {
  const std::string lib = std::string(TROUPE_TEST_FIXTURE_DIR) + "/libtest_constant_trainer.so";
  CommandResult r = train("--lib " + lib + " --trainer fixture-mean --epochs 1 --max-steps 30 --json");
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.last_line());
  CHECK(j.at("model") == "fixture-mean (10 parameters)");
  CHECK(j.at("steps") == 30);
  // A bias-only model on Fashion-MNIST's balanced classes stays at the uniform prediction's ln(10).
  CHECK(j.at("final_loss").get<double>() == Approx(std::log(10.0)).epsilon(0.01));
}

TEST_CASE("troupe train --lib and --trainer name what is wrong", "[cli][train][lib][errors]") {
  CommandResult missing = train("--lib /nonexistent/libmine.so --trainer mine --epochs 1");
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("--lib: trainer library /nonexistent/libmine.so does not exist") != std::string::npos);

  CommandResult old = train("--lib " + std::string(TROUPE_TEST_FIXTURE_DIR) +
                            "/libtest_other_version_trainer.so --trainer x --epochs 1");
  CHECK(old.exit_code == 1);
  CHECK(old.err.find("libtest_other_version_trainer.so was built against troupe 0.0.1") != std::string::npos);
  CHECK(old.err.find("rebuild it against this version") != std::string::npos);

  CommandResult unknown = train("--trainer nosuch --epochs 1");
  INFO(unknown.both());
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("--model 'nosuch' is not a known trainer; known: cnn, gpt, mlp") != std::string::npos);

  // A library trainer that says nothing of precision computes in f32 only.
  CommandResult f32_only = train("--lib " + std::string(TROUPE_TEST_FIXTURE_DIR) +
                                 "/libtest_constant_trainer.so --trainer fixture-mean --precision bf16 --epochs 1");
  INFO(f32_only.both());
  CHECK(f32_only.exit_code == 2);
  CHECK(f32_only.err.find("trainer 'fixture-mean' computes in f32 only; --precision bf16") != std::string::npos);

  CommandResult bad_arg = train("--trainer-arg hidden --epochs 1 --max-steps 1");
  CHECK(bad_arg.exit_code == 2);
  CHECK(bad_arg.err.find("--trainer-arg") != std::string::npos);
}

TEST_CASE("troupe train --strategy pipeline trains stage threads and reports each stage", "[cli][train][pipeline]") {
  troupe::testing::TempDir dir;
  CommandResult r = train("--strategy pipeline --stages 3 --workers 6 --microbatches 2 --hidden 64,32 --epochs 1 "
                          "--json --save " + dir.file("pipe.safetensors"));
  INFO(r.both());
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.last_line());
  CHECK(j.at("test_accuracy").get<double>() > 0.75);
  CHECK(j.at("steps") == 60000 / 128);
  for (int s = 0; s < 3; ++s) CHECK(r.out.find("stage " + std::to_string(s) + ": layers [") != std::string::npos);
  CHECK(r.out.find("(GPipe estimate 0.500)") != std::string::npos);
  // --save: the three stages' layers assembled into the whole model.
  CommandResult inspect = run_command(troupe_binary() + " model inspect --json " + dir.file("pipe.safetensors"));
  INFO(inspect.both());
  REQUIRE(inspect.exit_code == 0);
  auto m = nlohmann::json::parse(inspect.last_line());
  CHECK(m.at("parameters") == 784 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10);
  CHECK(m.at("tensors").size() == 6);
  CHECK(m.at("metadata").at("troupe.step") == "468");
  CHECK(std::stod(m.at("metadata").at("troupe.test_accuracy").get<std::string>()) ==
        Approx(j.at("test_accuracy").get<double>()).margin(1e-6));

  CommandResult bad = train("--strategy pipeline --stages 3 --hidden 64 --epochs 1");
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("--stages 3 is more stages than the model has layers (2)") != std::string::npos);
}
