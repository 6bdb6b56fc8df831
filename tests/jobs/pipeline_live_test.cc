// A pipeline's live recovery (trainers/job/pipeline_live.h, trainers/pipeline/stage_hold.h) in one
// process: which step the stages agree on for every pattern of holds, and a 2x2 pipeline cut short
// mid-run whose lost worker takes its stage's state from the other replica, ending bit for bit where
// the uninterrupted run ends. The whole path on a real cluster is live_recovery_cluster_test.cc.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "collectives/inproc_transport.h"
#include "tests/trainers/blobs.h"
#include "trainers/job/pipeline_live.h"
#include "trainers/pipeline/local_pipeline.h"

using namespace troupe;
using namespace troupe::job;
using troupe::pipeline::StageHold;

namespace {

// A hold of `newest` steps, with the step before when `before` (numbers derived from the step).
StageHold hold_at(int64_t newest, bool before) {
  auto state = [](int64_t step) {
    checkpoint::TrainingState s;
    s.step = step;
    s.epoch = 2;
    s.epoch_step = step % 7;
    s.params.assign(50, static_cast<float>(step) * 0.5f);
    s.optimizer.name = "adam";
    s.optimizer.steps = step;
    s.optimizer.vectors = {std::vector<float>(50, -static_cast<float>(step))};
    return s;
  };
  StageHold h;
  h.held = true;
  h.newest = state(newest);
  if (before) h.before = state(newest - 1);
  return h;
}

// agree_stage_state on R x K workers (index r * K + s) over in-process groups.
std::vector<Expected<LiveStart>> agree(std::vector<StageHold>& holds, int stages) {
  const int n = static_cast<int>(holds.size()), replicas = n / stages;
  auto job = collectives::make_inproc_group(n);
  std::vector<std::vector<std::unique_ptr<collectives::Transport>>> groups;
  for (int s = 0; s < stages; ++s) groups.push_back(collectives::make_inproc_group(replicas));
  std::vector<Expected<LiveStart>> out(n, Expected<LiveStart>(internal_error("not run")));
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w)
    threads.emplace_back([&, w] {
      const int s = w % stages, r = w / stages;
      collectives::Communicator all(std::move(job[w]));
      std::unique_ptr<collectives::Communicator> group;
      if (replicas > 1) group = std::make_unique<collectives::Communicator>(std::move(groups[s][r]));
      out[w] = agree_stage_state(all, group.get(), s, stages, holds[w], std::chrono::seconds(10));
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("pipeline live recovery: the stages go on from the newest step every stage holds", "[pipeline][live]") {
  std::string why;
  SECTION("every stage at one step") {
    CHECK(choose_pipeline_step({{0, 40, 41}, {1, 41, 41}, {0, 41, 41}, {1, -1, -1}}, 2, &why) == 41);
  }
  SECTION("a stage a step ahead gives the step before it kept") {
    // Stage 0 of replica 0 applied step 42 (its barrier completed), stage 1's survivor did not.
    CHECK(choose_pipeline_step({{0, 41, 42}, {1, 41, 41}, {0, -1, -1}, {1, -1, -1}}, 2, &why) == 41);
  }
  SECTION("a stage a step ahead without the step before: no step every stage holds") {
    CHECK(choose_pipeline_step({{0, 42, 42}, {1, 41, 41}}, 2, &why) == -1);
    CHECK(why.find("no survivor of stage 0 holds step 41") != std::string::npos);
  }
  SECTION("a one-replica pipeline's lost stage from the buddy mirroring it") {
    // Stage 1 lost; stage 2 keeps stage 1's rounds 40 and 41; stage 0 applied 42.
    CHECK(choose_pipeline_step({{0, 41, 42, 2, 41, 42}, {1, -1, -1, -1, -1, -1}, {2, 40, 41, 1, 40, 41}}, 3, &why) ==
          41);
    // Its buddy lost with it: nowhere.
    CHECK(choose_pipeline_step({{0, 41, 42, 2, 41, 42}, {1, -1, -1, -1, -1, -1}, {2, -1, -1, -1, -1, -1}}, 3, &why) ==
          -1);
    CHECK(why.find("no survivor holds stage 1's state") != std::string::npos);
  }
  SECTION("rounds every 5 steps (--mirror-every 5): the lost stage's buddy's newest round, the others back to it") {
    // Stage 1 lost at step 47; stage 2 keeps its rounds 40 and 45; stages 0 and 2 their own.
    CHECK(choose_pipeline_step({{0, 47, 47, 2, 40, 45, 40, 45}, {1, -1, -1, -1, -1, -1}, {2, 47, 47, 1, 40, 45, 40, 45}},
                               3, &why) == 45);
    // Lost while round 45 was sent: its buddy has 35 and 40 only; every survivor still keeps 40.
    CHECK(choose_pipeline_step({{0, 45, 45, 2, 40, 45, 40, 45}, {1, -1, -1, -1, -1, -1}, {2, 45, 45, 1, 35, 40, 40, 45}},
                               3, &why) == 40);
    // Not a step between rounds: 42 is in no round.
    StageOffer o{2, 47, 47, 1, 40, 45, 40, 45};
    CHECK_FALSE(o.mirrors(1, 42));
    CHECK_FALSE(o.holds(42));
    CHECK(o.holds(40));
    CHECK(o.mirrors(1, 45));
  }
  SECTION("every replica of a stage lost") {
    CHECK(choose_pipeline_step({{0, 40, 41}, {1, -1, -1}, {0, 41, 41}, {1, -1, -1}}, 2, &why) == -1);
    CHECK(why.find("no survivor holds stage 1's state") != std::string::npos);
  }
}

TEST_CASE("pipeline live recovery: each stage's state of the agreed step reaches every worker of that stage",
          "[pipeline][live]") {
  SECTION("a replacement at stage 0, the other stage 0 a step ahead") {
    // 2 replicas x 2 stages: worker 2 (replica 1, stage 0) is the replacement.
    std::vector<StageHold> holds = {hold_at(42, true), hold_at(41, true), StageHold{}, hold_at(41, false)};
    auto out = agree(holds, 2);
    for (int w = 0; w < 4; ++w) {
      INFO("worker " << w);
      REQUIRE(out[w].ok());
      CHECK(out[w]->live);
      CHECK(out[w]->state.step == 41);
      CHECK(out[w]->state.params == std::vector<float>(50, 20.5f));
      CHECK(out[w]->state.optimizer.vectors[0] == std::vector<float>(50, -41.0f));
      CHECK(out[w]->receivers == 1);  // the replacement
      // Stage 0's state (100 floats) sent once, to the replacement; stage 1's replicas both hold step
      // 41, so nothing of it moves.
      CHECK(out[w]->bytes == 100 * 4);
      CHECK(out[w]->from.find("step 41") != std::string::npos);
      CHECK_FALSE(holds[w].held);  // handed on
    }
  }
  SECTION("nobody holds anything: the checkpoint path") {
    std::vector<StageHold> holds(4);
    for (auto& o : agree(holds, 2)) {
      REQUIRE(o.ok());
      CHECK_FALSE(o->live);
    }
  }
  SECTION("both replicas of stage 1 lost: the checkpoint path, the holds dropped") {
    std::vector<StageHold> holds = {hold_at(41, true), StageHold{}, hold_at(41, true), StageHold{}};
    for (auto& o : agree(holds, 2)) {
      REQUIRE(o.ok());
      CHECK_FALSE(o->live);
    }
    for (auto& h : holds) CHECK_FALSE(h.held);
  }
  SECTION("one replica: a lost stage's state from its buddy's mirror, over the job's group") {
    std::vector<StageHold> holds = {hold_at(9, true), StageHold{}, hold_at(9, true)};
    holds[2].mirror.keep(1, hold_at(8, false).newest);  // stage 2 mirrors stage 1 (distance 1)
    holds[2].mirror.keep(1, hold_at(9, false).newest);
    auto out = agree(holds, 3);
    for (int w = 0; w < 3; ++w) {
      INFO("worker " << w);
      REQUIRE(out[w].ok());
      CHECK(out[w]->live);
      CHECK(out[w]->state.step == 9);
      CHECK(out[w]->state.params == std::vector<float>(50, 4.5f));
      CHECK(out[w]->receivers == 1);
      CHECK(out[w]->bytes == 100 * 4);  // stage 1's state, sent once
    }
  }
  SECTION("one replica: a stage's only worker keeps its own state") {
    std::vector<StageHold> holds = {hold_at(9, false), hold_at(9, true), hold_at(10, true)};
    auto out = agree(holds, 3);
    for (int w = 0; w < 3; ++w) {
      REQUIRE(out[w].ok());
      CHECK(out[w]->live);
      CHECK(out[w]->state.step == 9);
      CHECK(out[w]->bytes == 0);
    }
  }
}

TEST_CASE("pipeline live recovery: a 2x2 pipeline cut short mid-epoch, a lost worker's stage from the other "
          "replica, ends bit for bit where the uninterrupted run ends",
          "[pipeline][live][resume]") {
  const Dataset train = blobs(640, 6, 4, 41), test = blobs(128, 6, 4, 42);
  TrainOptions o;
  o.hidden = {16};  // 2 dense layers: one per stage
  o.epochs = 3;     // 20 steps an epoch
  o.batch_size = 32;
  o.seed = 5;
  o.optimizer = "adam";
  o.lr = 0.01f;
  o.lr_schedule = "cosine";
  pipeline::PipelineOptions po;
  po.stages = 2;
  po.workers = 4;
  po.microbatches = 2;
  auto whole = pipeline::train_local_pipeline(o, po, train, test);
  REQUIRE(whole.ok());
  REQUIRE(whole->train.steps == 60);
  {  // the barrier and the kept state change nothing in the numbers
    std::vector<StageHold> holds(4);
    pipeline::LocalCheckpoints lc;
    lc.holds = &holds;
    auto kept = pipeline::train_local_pipeline(o, po, train, test, {}, std::chrono::seconds(20), lc);
    REQUIRE(kept.ok());
    CHECK(kept->params == whole->params);
    for (auto& h : holds) CHECK_FALSE(h.held);  // nothing failed
  }
  for (int lost : {2, 1}) {  // replica 1's stage 0; replica 0's stage 1
    INFO("worker " << lost << " lost");
    std::vector<StageHold> holds(4);
    std::atomic<bool> cancel{false};
    pipeline::LocalCheckpoints first;
    first.holds = &holds;
    first.cancel = &cancel;
    const ProgressFn stop_at_27 = [&](const TrainProgress& p) {
      if ((p.epoch - 1) * p.steps_per_epoch + p.step >= 27) cancel = true;  // a stage stops; its neighbours are cut off mid-step
    };
    auto stopped = pipeline::train_local_pipeline(o, po, train, test, stop_at_27, std::chrono::seconds(20), first);
    REQUIRE_FALSE(stopped.ok());
    for (int w = 0; w < 4; ++w) {
      INFO("worker " << w);
      REQUIRE(holds[w].held);
      CHECK(holds[w].newest_step() >= 27);
    }
    holds[lost] = StageHold{};  // its memory gone with it
    auto agreed = agree(holds, 2);
    std::vector<std::optional<checkpoint::TrainingState>> live(4);
    for (int w = 0; w < 4; ++w) {
      REQUIRE(agreed[w].ok());
      REQUIRE(agreed[w]->live);
      CHECK(agreed[w]->state.step == agreed[0]->state.step);
      live[w] = std::move(agreed[w]->state);
    }
    pipeline::LocalCheckpoints resume;
    resume.live = &live;
    auto rest = pipeline::train_local_pipeline(o, po, train, test, {}, std::chrono::seconds(20), resume);
    REQUIRE(rest.ok());
    CHECK(rest->train.steps == 60);
    CHECK(rest->params == whole->params);
    CHECK(rest->train.test_accuracy == whole->train.test_accuracy);
  }
}

TEST_CASE("pipeline live recovery: a one-replica pipeline cut short mid-epoch, a lost stage's state from its buddy "
          "stage's mirror, ends bit for bit where the uninterrupted run ends",
          "[pipeline][live][resume]") {
  const Dataset train = blobs(640, 6, 4, 43), test = blobs(128, 6, 4, 44);
  TrainOptions o;
  o.hidden = {16, 12};  // 3 dense layers: one per stage
  o.epochs = 2;
  o.batch_size = 32;
  o.seed = 3;
  o.optimizer = "adam";
  o.lr = 0.01f;
  pipeline::PipelineOptions po;
  po.stages = 3;
  po.workers = 3;
  po.microbatches = 2;
  auto whole = pipeline::train_local_pipeline(o, po, train, test);
  REQUIRE(whole.ok());
  for (const int every : {1, 4})
  for (int lost : {0, 1, 2}) {
    INFO("stage " << lost << " lost, rounds every " << every << " steps");
    std::vector<StageHold> holds(3);
    std::atomic<bool> cancel{false};
    pipeline::LocalCheckpoints first;
    first.holds = &holds;
    first.cancel = &cancel;
    first.mirror_distance = 1;
    first.mirror_every = every;
    const ProgressFn stop_at_13 = [&](const TrainProgress& p) {
      if ((p.epoch - 1) * p.steps_per_epoch + p.step >= 13) cancel = true;
    };
    REQUIRE_FALSE(pipeline::train_local_pipeline(o, po, train, test, stop_at_13, std::chrono::seconds(20), first).ok());
    for (int w = 0; w < 3; ++w) {
      REQUIRE(holds[w].held);
      CHECK(holds[w].mirror.stage() == (w + 2) % 3);  // the stage behind it on the ring
      CHECK(holds[w].mirror.newest_step() >= (every == 1 ? 12 : 8));
      CHECK(holds[w].mirror.newest_step() % every == 0);
      if (every > 1) CHECK_FALSE(holds[w].before);  // spaced rounds: no copy before each update
    }
    holds[lost] = StageHold{};
    auto agreed = agree(holds, 3);
    std::vector<std::optional<checkpoint::TrainingState>> live(3);
    for (int w = 0; w < 3; ++w) {
      REQUIRE(agreed[w].ok());
      REQUIRE(agreed[w]->live);
      if (every > 1) CHECK(agreed[w]->state.step % every == 0);  // back to a whole round
      live[w] = std::move(agreed[w]->state);
    }
    pipeline::LocalCheckpoints resume;
    resume.live = &live;
    auto rest = pipeline::train_local_pipeline(o, po, train, test, {}, std::chrono::seconds(20), resume);
    REQUIRE(rest.ok());
    CHECK(rest->params == whole->params);
  }
}
