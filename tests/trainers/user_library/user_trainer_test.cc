// examples/user_trainer built against the installed trainer API (build_user_trainer.sh, run first
// as a CTest fixture), loaded like `troupe train --lib` does and trained on Fashion-MNIST.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <cstdlib>

#include "tests/core/temp_dir.h"
#include "trainers/local/local_trainer.h"
#include "trainers/library/trainer_library.h"
#include "trainers/library/trainer_registry.h"

using namespace troupe;

namespace {
std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}
}  // namespace

TEST_CASE("the example trainer built with find_package loads and learns", "[user_trainer]") {
  auto lib = load_trainer_library(std::string(TROUPE_USER_TRAINER_DIR) + "/cmake/libuser_trainer.so");
  REQUIRE(lib.ok());
  CHECK(sorted(lib->trainers) == std::vector<std::string>{"bigram", "logreg"});
  REQUIRE(trainer_registry().contains("logreg"));

  TrainOptions o;
  o.model = "logreg";
  o.epochs = 1;
  o.max_steps = 60;
  o.optimizer = "sgd";
  o.lr = 0.1f;
  o.trainer_args = {"init_std=0.001"};
  double first_loss = 0;
  auto r = train_local(o, [&](const TrainProgress& p) {
    if (p.step == 1 && !p.epoch_done) first_loss = p.loss;
  });
  REQUIRE(r.ok());
  CHECK(r->model == "logreg 784-10 softmax regression");
  CHECK(first_loss == Approx(std::log(10.0)).epsilon(0.05));  // near-zero weights: uniform predictions
  CHECK(r->final_loss < first_loss * 0.6);
  CHECK(r->test_accuracy > 0.65);
}

TEST_CASE("the example trainer built with pkg-config loads", "[user_trainer]") {
  auto lib = load_trainer_library(std::string(TROUPE_USER_TRAINER_DIR) + "/libuser_trainer_pc.so");
  REQUIRE(lib.ok());
  CHECK(sorted(lib->trainers) == std::vector<std::string>{"bigram", "logreg"});
  auto t = trainer_registry().create("logreg");
  CHECK(t.ok());
}

TEST_CASE("the example trainer learns the user's own .npy files (examples/own_data)", "[user_trainer][data]") {
  auto lib = load_trainer_library(std::string(TROUPE_USER_TRAINER_DIR) + "/cmake/libuser_trainer.so");
  REQUIRE(lib.ok());
  troupe::testing::TempDir dir;
  const std::string cmd = "/usr/bin/python3 " TROUPE_SOURCE_DIR "/examples/own_data/make_data.py " + dir.path() +
                          " > " + dir.file("log") + " 2>&1";
  INFO("examples/own_data/make_data.py failed (python3-numpy: scripts/install-deps.sh)");
  REQUIRE(std::system(cmd.c_str()) == 0);
  TrainOptions o;
  o.model = "logreg";
  o.data = dir.path();
  o.epochs = 5;
  o.batch_size = 32;
  auto r = train_local(o, {});
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  CHECK(r->model == "logreg 8-3 softmax regression");
  CHECK(r->test_accuracy > 0.9);  // three well-separated blobs, evaluated on the 600 of x_val/y_val
}

// examples/user_trainer/next_token.cc on examples/own_data/make_tokens.py's Markov chain: --seq-len
// windows of a raw u16 stream feed the fields it requires, and its validation loss comes down to
// the chain's entropy rate (the floor no model beats), computed exactly by the script.
TEST_CASE("a user's next-token model learns a token stream cut into --seq-len windows", "[user_trainer][data]") {
  auto lib = load_trainer_library(std::string(TROUPE_USER_TRAINER_DIR) + "/cmake/libuser_trainer.so");
  REQUIRE(lib.ok());
  troupe::testing::TempDir dir;
  const std::string cmd = "/usr/bin/python3 " TROUPE_SOURCE_DIR "/examples/own_data/make_tokens.py " + dir.path() +
                          " > " + dir.file("log") + " 2>&1";
  {
    INFO("examples/own_data/make_tokens.py failed (python3-numpy: scripts/install-deps.sh)");
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  std::ifstream log(dir.file("log"));
  std::string line;
  double rate = -1;
  while (std::getline(log, line))
    if (line.rfind("entropy rate ", 0) == 0) rate = std::stod(line.substr(13));
  REQUIRE(rate > 0.5);
  TrainOptions o;
  o.model = "bigram";
  o.data = dir.path();
  o.seq_len = 32;
  o.epochs = 3;
  o.batch_size = 32;
  o.lr = 0.05f;
  SECTION("trained whole, and by micro-batches") {
    if (GENERATE(false, true)) o.accumulate = 2;
    double first_loss = 0;
    auto r = train_local(o, [&](const TrainProgress& p) {
      if (p.epoch == 1 && p.step == 1 && !p.epoch_done) first_loss = p.loss;
    });
    INFO(r.status().to_string());
    REQUIRE(r.ok());
    CHECK(first_loss == Approx(std::log(16.0)).epsilon(0.02));  // a zero table: uniform over 16 tokens
    INFO("validation loss " << r->test_loss << ", entropy rate " << rate);
    CHECK(r->test_accuracy == -1);
    CHECK(r->test_loss < rate + 0.05);
    CHECK(r->test_loss > rate - 0.05);  // (a sample of 40,000 tokens: its own rate is within a few hundredths)
  }
  SECTION("data without the fields it requires is refused before training, naming them") {
    o.data.clear();
    o.seq_len = 0;  // the built-in Fashion-MNIST: images and classes
    auto r = train_local(o, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("needs a field 'tokens' (f32 of per-example rank 1)") != std::string::npos);
  }
}
