// The one-device training loop: options validation, shuffling, and short runs on the real dataset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "trainers/local/local_trainer.h"
#include "trainers/optim/lr_schedule.h"

using namespace troupe;

TEST_CASE("TrainOptions::validate names the bad field", "[trainers][options]") {
  struct Case {
    const char* field;
    void (*mutate)(TrainOptions&);
  };
  const Case cases[] = {
      {"--model", [](TrainOptions& o) { o.model = "cnn9000"; }},
      {"--dataset", [](TrainOptions& o) { o.dataset = "imagenet"; }},
      {"--hidden", [](TrainOptions& o) { o.hidden = {256, 0}; }},
      {"--epochs", [](TrainOptions& o) { o.epochs = 0; }},
      {"--batch-size", [](TrainOptions& o) { o.batch_size = -1; }},
      {"--optimizer", [](TrainOptions& o) { o.optimizer = "lion"; }},
      {"--lr", [](TrainOptions& o) { o.lr = -0.1f; }},
      {"--lr", [](TrainOptions& o) { o.lr = NAN; }},
      {"--lr-schedule", [](TrainOptions& o) { o.lr_schedule = "linear"; }},
      {"--momentum", [](TrainOptions& o) { o.momentum = 1.0f; }},
      {"--weight-decay", [](TrainOptions& o) { o.weight_decay = -1.0f; }},
      {"--max-steps", [](TrainOptions& o) { o.max_steps = -3; }},
  };
  CHECK(TrainOptions{}.validate().ok());
  for (const Case& c : cases) {
    TrainOptions o;
    c.mutate(o);
    Status st = o.validate();
    INFO(c.field << ": " << st.to_string());
    CHECK(st.code() == Code::invalid_argument);
    CHECK(st.message().find(c.field) != std::string::npos);
  }
}

TEST_CASE("effective_lr picks the optimizer's default only when none is given", "[trainers][options]") {
  TrainOptions o;
  o.optimizer = "sgd";
  CHECK(o.effective_lr() == Approx(0.05f));
  o.optimizer = "adam";
  CHECK(o.effective_lr() == Approx(0.002f));
  o.lr = 0.3f;
  CHECK(o.effective_lr() == Approx(0.3f));
}

TEST_CASE("cosine schedule decays from the base rate to zero", "[trainers][schedule]") {
  CHECK(scheduled_lr(LrSchedule::constant, 0.1f, 500, 1000) == Approx(0.1f));
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 0, 1000) == Approx(0.1f));
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 500, 1000) == Approx(0.05f));
  CHECK(scheduled_lr(LrSchedule::cosine, 0.1f, 1000, 1000) == Approx(0.0f).margin(1e-9));
  float prev = 1.0f;
  for (int s = 0; s <= 100; ++s) {
    float lr = scheduled_lr(LrSchedule::cosine, 0.1f, s, 100);
    CHECK(lr <= prev);
    prev = lr;
  }
}

TEST_CASE("every epoch visits each example once, in its own seeded order", "[trainers][shuffle]") {
  auto a = epoch_permutation(1000, 42, 1);
  auto b = epoch_permutation(1000, 42, 1);
  auto c = epoch_permutation(1000, 42, 2);
  auto d = epoch_permutation(1000, 43, 1);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
  std::vector<int32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
  CHECK(epoch_permutation(0, 1, 1).empty());
}

TEST_CASE("train_local trains on the real dataset and reports progress", "[trainers][train]") {
  TrainOptions o;
  o.epochs = 2;
  o.max_steps = 150;  // a short job: one full epoch of 468 steps is not needed to see learning
  int progress_calls = 0, epochs_done = 0;
  auto result = train_local(o, [&](const TrainProgress& p) {
    ++progress_calls;
    if (p.epoch_done) ++epochs_done;
    CHECK(p.epochs == 2);
    CHECK(std::isfinite(p.loss));
  });
  REQUIRE(result.ok());
  CHECK(result->steps == 150);
  CHECK(result->epochs == 1);  // stopped inside the first epoch by max_steps
  CHECK(epochs_done == 1);
  CHECK(progress_calls == 151);
  CHECK(result->test_accuracy > 0.75);  // 150 steps of Adam already beat chance (0.10) by far
  CHECK(result->final_loss < 1.0);
  CHECK(result->device == "cpu");
  CHECK(result->model.find("784-256-128-10") != std::string::npos);
}

TEST_CASE("train_local reports a missing dataset with the file and the fix", "[trainers][train][errors]") {
  TrainOptions o;
  o.dataset_dir = "/nonexistent/dir";
  auto result = train_local(o);
  REQUIRE(!result.ok());
  CHECK(result.status().code() == Code::not_found);
  CHECK(result.status().message().find("/nonexistent/dir") != std::string::npos);
}

TEST_CASE("a batch larger than the training set is refused", "[trainers][train][errors]") {
  Dataset tiny;
  tiny.count = 10;
  tiny.rows = tiny.cols = 2;
  tiny.images.assign(40, 0.5f);
  tiny.labels.assign(10, 1);
  TrainOptions o;
  o.batch_size = 64;
  auto r = train_mlp_cpu(o, tiny, tiny);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == Code::invalid_argument);
  CHECK(r.status().message().find("--batch-size") != std::string::npos);
}
