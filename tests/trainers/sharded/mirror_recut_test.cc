// A sharded elastic job's state re-cut from the buddy mirrors for a group of another size
// (trainers/sharded/mirror_recut.h): ranks train with mirror rounds over a real in-process group,
// some are lost, and a group of another size — survivors renumbered, newcomers with nothing —
// takes the round's state: every rank's new share of the optimizer state and the parameters
// exactly the floats the old group held at that step.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <mutex>

#include "tests/collectives/group.h"
#include "trainers/sharded/buddy_mirror.h"
#include "trainers/sharded/mirror_recut.h"
#include "trainers/sharded/sharded_state.h"

using namespace troupe;
using collectives::Communicator;
using collectives::testing::run_inproc;

namespace {

// The model's layout and optimizer. By default four buckets of 37 floats (chunks uneven at every
// size from 2 to 5) and adam; `tiny`: two buckets of 2 floats (ranks 2 and 3 of 4 own nothing);
// sgd without momentum keeps no state vectors.
struct Shape {
  std::vector<GradBucket> buckets = {{23, 14, 3, 3}, {10, 13, 2, 2}, {3, 7, 1, 1}, {0, 3, 0, 0}};
  size_t total = 37;
  std::string optimizer = "adam";
  float momentum = 0.9f;  // sgd's
  size_t vectors() const { return optimizer == "adam" ? 2 : momentum > 0 ? 1 : 0; }
};
Shape tiny() {
  Shape s;
  s.buckets = {{2, 2, 1, 1}, {0, 2, 0, 0}};
  s.total = 4;
  return s;
}
Shape plain_sgd() {
  Shape s;
  s.optimizer = "sgd";
  s.momentum = 0.0f;
  return s;
}
constexpr auto kTimeout = std::chrono::milliseconds(5000);

std::unique_ptr<ShardedState> make_state(Communicator& comm, ShardStage stage, const Shape& shape) {
  OptimizerOptions oo;
  oo.name = shape.optimizer;
  oo.lr = 0.01f;
  oo.momentum = shape.momentum;
  ShardedState::Options so;
  so.stage = stage;
  so.timeout = kTimeout;
  auto made = ShardedState::create(comm, shape.buckets, shape.total, oo, so);
  if (!made.ok()) throw std::runtime_error(made.status().to_string());
  return std::move(*made);
}

// The old group's state at each step, whole: parameters, optimizer vectors, optimizer steps.
struct Whole {
  std::vector<float> params;
  std::vector<std::vector<float>> vectors;
  int64_t steps = 0;
};

// `world` ranks train `steps` steps with a round every `every` at buddy distance `distance`; their
// rounds, and the whole state at every step (assembled from every rank's chunks).
struct Trained {
  Shape shape;
  std::vector<MirrorHold> holds;
  std::vector<Whole> at_step;
};
Trained train(int world, int64_t steps, int64_t every, int distance, const Shape& shape = Shape{}) {
  Trained out;
  out.shape = shape;
  const size_t total = shape.total;
  out.holds.resize(static_cast<size_t>(world));
  out.at_step.resize(static_cast<size_t>(steps + 1));
  for (Whole& w : out.at_step) w.vectors.assign(shape.vectors(), std::vector<float>(total));
  std::mutex mu;
  auto status = run_inproc(world, [&](Communicator& comm) -> Status {
    const int r = comm.rank();
    auto zero = make_state(comm, ShardStage::optimizer, shape);
    std::vector<float> params(total);
    for (size_t i = 0; i < total; ++i) params[i] = 0.01f * static_cast<float>(i);
    BuddyMirror mirror(comm, *zero, every, distance, kTimeout);
    auto note = [&](int64_t s) {
      std::lock_guard<std::mutex> lock(mu);
      Whole& w = out.at_step[static_cast<size_t>(s)];
      w.params = params;
      const OptimizerState mine = zero->owned_optimizer();
      if (!zero->owned_ranges().empty()) w.steps = mine.steps;  // (a rank owning nothing counts none)
      size_t at = 0;
      for (const auto& [begin, end] : zero->owned_ranges()) {
        for (size_t v = 0; v < mine.vectors.size(); ++v)
          std::copy(mine.vectors[v].begin() + at, mine.vectors[v].begin() + at + (end - begin), w.vectors[v].begin() + begin);
        at += end - begin;
      }
    };
    note(0);
    TROUPE_RETURN_IF_ERROR(mirror.after_step(params.data(), 0, 1, 0));
    for (int64_t s = 1; s <= steps; ++s) {
      for (const auto& [begin, end] : zero->owned_ranges())
        for (size_t i = begin; i < end; ++i)
          zero->grads()[i] = 0.1f * static_cast<float>((i * 7 + static_cast<size_t>(r + s * 3)) % 11) - 0.5f;
      zero->step(params.data(), 0.01f);
      TROUPE_RETURN_IF_ERROR(zero->gather(params.data()));
      note(s);
      TROUPE_RETURN_IF_ERROR(mirror.after_step(params.data(), s, 1 + static_cast<int>(s / 5), s % 5));
    }
    out.holds[static_cast<size_t>(r)] = mirror.release();
    return {};
  });
  for (const Status& s : status) REQUIRE(s.to_string() == "ok");
  return out;
}

// A new group: rank i holds old rank `kept[i]`'s rounds (-1: a newcomer), `stage` its sharding.
// Each rank's choice, start and state after restore_recut.
struct Recut {
  std::vector<MirrorChoice> choices;
  std::vector<MirrorStart> starts;
  std::vector<std::vector<float>> params;         // whole (stage optimizer) or the owned chunks' floats in place
  std::vector<OptimizerState> optimizer;          // each rank's owned
  std::vector<std::vector<std::pair<size_t, size_t>>> owned;
};
Recut recut(const Trained& t, const std::vector<int>& kept, ShardStage stage,
            const std::function<void(int, MirrorHold&)>& edit = {}) {
  const int n = static_cast<int>(kept.size());
  Recut out;
  out.choices.resize(kept.size());
  out.starts.resize(kept.size());
  out.params.resize(kept.size());
  out.optimizer.resize(kept.size());
  out.owned.resize(kept.size());
  std::vector<MirrorReport> reports(kept.size());
  std::vector<MirrorHold> holds(kept.size());
  for (int i = 0; i < n; ++i) {
    if (kept[i] >= 0) holds[i] = t.holds[static_cast<size_t>(kept[i])];
    if (edit) edit(i, holds[i]);
    reports[i] = report_of(holds[i]);
  }
  auto status = run_inproc(n, [&](Communicator& comm) -> Status {
    const int r = comm.rank();
    auto zero = make_state(comm, stage, t.shape);
    std::vector<float> params(t.shape.total, 0.0f);
    const MirrorChoice choice = choose_mirror_round(reports);
    out.choices[r] = choice;
    if (choice.step < 0) return {};
    MirrorResume at;
    at.hold = &holds[r];
    at.step = choice.step;
    at.from_world = choice.world;
    const bool whole = stage != ShardStage::parameters;
    auto back = restore_recut(comm, *zero, whole, params.data(), at, kTimeout);
    if (!back.ok()) return back.status();
    out.starts[r] = *back;
    out.params[r] = whole ? params : std::vector<float>(zero->params(), zero->params() + t.shape.total);
    out.optimizer[r] = zero->owned_optimizer();
    out.owned[r] = zero->owned_ranges();
    return {};
  });
  for (const Status& s : status) REQUIRE(s.to_string() == "ok");
  return out;
}

// Every new rank holds exactly the old group's state at `step`: the whole parameters (or its
// chunks of them) and its new chunks of each optimizer vector.
void check_exact(const Trained& t, const Recut& c, int64_t step, bool whole) {
  const Whole& want = t.at_step[static_cast<size_t>(step)];
  for (size_t r = 0; r < c.starts.size(); ++r) {
    INFO("new rank " << r);
    REQUIRE(c.choices[r].step == step);
    CHECK(c.starts[r].step == step);
    CHECK(c.starts[r].epoch == 1 + static_cast<int>(step / 5));
    CHECK(c.starts[r].epoch_step == step % 5);
    if (!c.owned[r].empty()) CHECK(c.optimizer[r].steps == want.steps);
    if (whole) CHECK(c.params[r] == want.params);
    std::vector<std::vector<float>> vectors(want.vectors.size());
    for (const auto& [begin, end] : c.owned[r]) {
      if (!whole)
        CHECK(std::vector<float>(c.params[r].begin() + begin, c.params[r].begin() + end) ==
              std::vector<float>(want.params.begin() + begin, want.params.begin() + end));
      for (size_t v = 0; v < vectors.size(); ++v)
        vectors[v].insert(vectors[v].end(), want.vectors[v].begin() + begin, want.vectors[v].begin() + end);
    }
    if (!c.owned[r].empty()) CHECK(c.optimizer[r].vectors == vectors);
  }
}

}  // namespace

TEST_CASE("mirror re-cut: the round's group size and numbering decide whether a restore re-cuts", "[sharded][mirror]") {
  auto report = [](int rank, int world) {
    MirrorReport r{-1, 6, false, true, 1};
    r.rank = rank;
    r.world = world;
    return r;
  };
  // Four ranks, rank 1 replaced in place: the same layout.
  MirrorChoice same = choose_mirror_round({report(0, 4), MirrorReport{}, report(2, 4), report(3, 4)});
  CHECK(same.step == 6);
  CHECK(same.world == 4);
  CHECK(same.same_layout);
  // Old rank 1 lost, the other three renumbered 0..2: re-cut from 4.
  MirrorChoice shrunk = choose_mirror_round({report(0, 4), report(2, 4), report(3, 4)});
  CHECK(shrunk.step == 6);
  CHECK(shrunk.world == 4);
  CHECK_FALSE(shrunk.same_layout);
  // Grown from 3 to 4: a newcomer last.
  MirrorChoice grown = choose_mirror_round({report(0, 3), report(1, 3), report(2, 3), MirrorReport{}});
  CHECK(grown.step == 6);
  CHECK(grown.world == 3);
  CHECK_FALSE(grown.same_layout);
  // Old ranks 1 and 2 lost at distance 1: old rank 1's shard went with its buddy.
  CHECK(choose_mirror_round({report(0, 4), report(3, 4)}).step == -1);
  // A rank still holding an older group's round of the same step: the group that covers it wins.
  MirrorChoice mixed = choose_mirror_round({report(5, 8), report(0, 2), report(1, 2)});
  CHECK(mixed.step == 6);
  CHECK(mixed.world == 2);
}

TEST_CASE("mirror re-cut: four ranks shrink to three and two, and three grow to four, bit for bit",
          "[sharded][mirror]") {
  SECTION("old rank 1 lost: its shard from its buddy (old rank 2), the state cut for three") {
    const Trained t = train(4, 7, 1, 1);
    const Recut c = recut(t, {0, 2, 3}, ShardStage::optimizer);
    CHECK_FALSE(c.choices[0].same_layout);
    check_exact(t, c, 7, true);
    CHECK(c.starts[0].bytes > 0);
    for (const MirrorStart& s : c.starts) CHECK(s.bytes == c.starts[0].bytes);
  }
  SECTION("a round every 3 steps, 7 done: every rank back to step 6") {
    const Trained t = train(4, 7, 3, 1);
    check_exact(t, recut(t, {3, 0, 2}, ShardStage::optimizer), 6, true);  // renumbered out of order
  }
  SECTION("packed two by two (distance 2), a node with old ranks 2 and 3 lost: two ranks from their copies") {
    const Trained t = train(4, 5, 1, 2);
    check_exact(t, recut(t, {0, 1}, ShardStage::optimizer), 5, true);
  }
  SECTION("stage parameters: each rank only its new chunks of the parameters") {
    const Trained t = train(4, 6, 2, 1);
    check_exact(t, recut(t, {1, 2, 3}, ShardStage::parameters), 6, false);
  }
  SECTION("three grow back to four: the newcomer holds nothing and takes its share from the others") {
    const Trained t = train(3, 6, 1, 1);
    check_exact(t, recut(t, {0, 1, 2, -1}, ShardStage::optimizer), 6, true);
    check_exact(t, recut(t, {0, -1, 1, 2}, ShardStage::parameters), 6, false);
  }
  SECTION("the same four ranks renumbered: the same size, another layout") {
    const Trained t = train(4, 5, 1, 1);
    const Recut c = recut(t, {1, 0, 3, 2}, ShardStage::optimizer);
    CHECK_FALSE(c.choices[0].same_layout);
    check_exact(t, c, 5, true);
  }
  SECTION("old ranks owning nothing (buckets of 2 floats over 4): the optimizer's step count from a rank that owns") {
    const Trained t = train(4, 5, 1, 1, tiny());
    REQUIRE(t.at_step[5].steps == 5);
    check_exact(t, recut(t, {0, 1, 3}, ShardStage::optimizer), 5, true);
    check_exact(t, recut(t, {3, 1}, ShardStage::parameters), 5, false);
  }
  SECTION("sgd without momentum keeps no vectors: the parameters alone") {
    const Trained t = train(4, 4, 1, 1, plain_sgd());
    check_exact(t, recut(t, {0, 2, 3}, ShardStage::optimizer), 4, true);
    check_exact(t, recut(t, {0, 1, 2, 3, -1}, ShardStage::parameters), 4, false);
  }
  SECTION("the newest round cut short where it mattered: the round before") {
    const Trained t = train(4, 6, 2, 1);
    const Recut c = recut(t, {0, 1, 3}, ShardStage::optimizer, [](int rank, MirrorHold& hold) {
      if (rank == 2) hold.newest.mirrored = false;  // old rank 2's round of step 6 never reached old rank 3
    });
    check_exact(t, c, 4, true);
  }
}
