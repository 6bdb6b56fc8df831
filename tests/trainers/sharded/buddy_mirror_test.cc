// The buddy mirror of sharded replicas (trainers/sharded/buddy_mirror.h): which round a recovery
// goes on from, and a lost rank's shard — its parameters' chunks and optimizer state — coming back
// exactly from its buddy's copy, over a real group of four ranks (threads, in-process transport).
#include <catch2/catch.hpp>

#include <memory>
#include <mutex>

#include "tests/collectives/group.h"
#include "trainers/sharded/buddy_mirror.h"
#include "trainers/sharded/sharded_state.h"

using namespace troupe;
using collectives::Communicator;
using collectives::testing::run_inproc;

namespace {

MirrorReport held(int64_t older, bool older_mirrored, int64_t newest, bool newest_mirrored) {
  return MirrorReport{older, newest, older_mirrored, newest_mirrored};
}
const MirrorReport kLost{};  // a replacement: nothing

// Three buckets of 30 floats (uneven chunks over 4 ranks), Adam's two vectors.
const std::vector<GradBucket> kBuckets = {{20, 10, 2, 2}, {3, 17, 1, 1}, {0, 3, 0, 0}};
constexpr size_t kTotal = 30;

std::unique_ptr<ShardedState> make_state(Communicator& comm) {
  OptimizerOptions oo;
  oo.name = "adam";
  oo.lr = 0.01f;
  ShardedState::Options so;
  so.stage = ShardStage::optimizer;
  so.timeout = std::chrono::milliseconds(5000);
  auto made = ShardedState::create(comm, kBuckets, kTotal, oo, so);
  if (!made.ok()) throw std::runtime_error(made.status().to_string());
  return std::move(*made);
}

// One step: gradients that differ per rank and step on the rank's chunks, the update, the gather.
Status train_step(ShardedState& zero, std::vector<float>& params, int rank, int64_t step) {
  for (const auto& [begin, end] : zero.owned_ranges())
    for (size_t i = begin; i < end; ++i) zero.grads()[i] = 0.1f * static_cast<float>((i * 7 + rank + step * 3) % 11) - 0.5f;
  zero.step(params.data(), 0.01f);
  return zero.gather(params.data());
}

struct Snapshot {
  std::vector<float> params;
  OptimizerState optimizer;
};

// Four ranks train `steps` steps with a round every `every`; then rank `lost` starts again empty
// (a replacement: new state, no rounds), `edit` may change a survivor's rounds, the ranks agree
// on a step and restore it. Returns each rank's state after the restore and what it was at every
// step, and the step chosen.
struct Outcome {
  int64_t chosen = -1;
  std::vector<MirrorStart> starts = std::vector<MirrorStart>(4);
  std::vector<Snapshot> restored = std::vector<Snapshot>(4);
  std::vector<std::vector<Snapshot>> at_step = std::vector<std::vector<Snapshot>>(4);  // [rank][step]
};
Outcome lose_and_restore(int64_t steps, int64_t every, int lost, const std::function<void(int, MirrorHold&)>& edit,
                         int distance = 1, bool overlapped = false) {
  Outcome out;
  std::mutex mu;
  std::vector<MirrorReport> reports(4);
  auto second = collectives::make_inproc_group(4);  // the mirror's own group (overlapped)
  auto status = run_inproc(4, [&](Communicator& comm) -> Status {
    const int r = comm.rank();
    Communicator own(std::move(second[static_cast<size_t>(r)]));
    auto zero = make_state(comm);
    std::vector<float> params(kTotal);
    for (size_t i = 0; i < kTotal; ++i) params[i] = 0.01f * static_cast<float>(i);
    BuddyMirror mirror(comm, *zero, every, distance, std::chrono::milliseconds(5000), overlapped ? &own : nullptr);
    out.at_step[r].push_back({params, zero->owned_optimizer()});
    TROUPE_RETURN_IF_ERROR(mirror.after_step(params.data(), 0, 1, 0));
    for (int64_t s = 1; s <= steps; ++s) {
      TROUPE_RETURN_IF_ERROR(mirror.wait());  // (overlapped: before the step's collectives)
      TROUPE_RETURN_IF_ERROR(train_step(*zero, params, r, s));
      out.at_step[r].push_back({params, zero->owned_optimizer()});
      TROUPE_RETURN_IF_ERROR(mirror.after_step(params.data(), s, 1 + static_cast<int>(s / 5), s % 5));
    }
    MirrorHold hold = mirror.release();
    if (r == lost) {  // its process is gone: a new one, nothing in memory
      zero = make_state(comm);
      params.assign(kTotal, 0.0f);
      hold = MirrorHold{};
    }
    if (edit) edit(r, hold);
    {
      std::lock_guard<std::mutex> lock(mu);
      reports[r] = report_of(hold);
    }
    TROUPE_RETURN_IF_ERROR(comm.barrier());
    const int64_t step = choose_mirror_step(reports);
    if (r == 0) out.chosen = step;
    if (step < 0) return {};
    MirrorResume at;
    at.hold = &hold;
    at.step = step;
    at.distance = distance;
    auto back = restore_from_mirror(comm, *zero, true, params.data(), at, std::chrono::milliseconds(5000));
    if (!back.ok()) return back.status();
    out.starts[r] = *back;
    out.restored[r] = {params, zero->owned_optimizer()};
    return {};
  });
  for (const Status& s : status) REQUIRE(s.to_string() == "ok");
  return out;
}

void check_exact(const Outcome& o, int64_t step) {
  REQUIRE(o.chosen == step);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    const Snapshot& want = o.at_step[r][static_cast<size_t>(step)];
    CHECK(o.restored[r].params == want.params);  // the whole parameters, gathered, bit for bit
    CHECK(o.restored[r].optimizer.steps == want.optimizer.steps);
    CHECK(o.restored[r].optimizer.vectors == want.optimizer.vectors);
    CHECK(o.starts[r].step == step);
    CHECK(o.starts[r].epoch == 1 + static_cast<int>(step / 5));
    CHECK(o.starts[r].epoch_step == step % 5);
  }
}

}  // namespace

TEST_CASE("buddy mirror: the newest step every rank's shard survives at, from its owner or its buddy", "[sharded][mirror]") {
  // Everyone there: the newest round.
  CHECK(choose_mirror_step({held(2, true, 4, true), held(2, true, 4, true), held(2, true, 4, true)}) == 4);
  // Rank 1 lost, rank 2 received its round 4: round 4.
  CHECK(choose_mirror_step({held(2, true, 4, true), kLost, held(2, true, 4, true), held(2, true, 4, true)}) == 4);
  // Rank 1 lost while round 4 was sent: rank 2 never got it, so round 2 (whole everywhere).
  CHECK(choose_mirror_step({held(2, true, 4, true), kLost, held(2, true, 4, false), held(2, true, 4, true)}) == 2);
  // A survivor that had not taken round 4 yet (so rank 0 never got its copy): round 2.
  CHECK(choose_mirror_step({held(2, true, 4, false), kLost, held(2, true, 4, true), held(-1, false, 2, true)}) == 2);
  // A shard's owner and its buddy both lost: nothing covers rank 1's shard.
  CHECK(choose_mirror_step({held(2, true, 4, true), kLost, kLost, held(2, true, 4, true)}) == -1);
  // Rank 3's buddy is rank 0, around the ring.
  CHECK(choose_mirror_step({held(2, true, 4, true), held(2, true, 4, true), held(2, true, 4, true), kLost}) == 4);
  CHECK(choose_mirror_step({held(2, true, 4, false), held(2, true, 4, true), held(2, true, 4, true), kLost}) == 2);
  // Nobody holds anything (a whole-cluster restart), or two ranks both lost in a group of two.
  CHECK(choose_mirror_step({kLost, kLost, kLost}) == -1);
  CHECK(choose_mirror_step({kLost, kLost}) == -1);
  CHECK(choose_mirror_step({held(-1, false, 0, true), kLost}) == 0);
}

TEST_CASE("buddy mirror: a lost rank's shard comes back from its buddy bit for bit, every rank rolled back to the round",
          "[sharded][mirror]") {
  SECTION("a round every step: the state of the last step") {
    check_exact(lose_and_restore(7, 1, 2, {}), 7);
  }
  SECTION("a round every 3 steps, 7 done: back to step 6 on every rank") {
    const Outcome o = lose_and_restore(7, 3, 1, {});
    check_exact(o, 6);
    // Rank 1's shard came from rank 2: its record's bytes (header, 8 floats of it, 2 vectors).
    CHECK(o.starts[0].bytes > 0);
    for (const MirrorStart& s : o.starts) CHECK(s.bytes == o.starts[0].bytes);
  }
  SECTION("rank 0 lost: its copy is on rank 1") {
    check_exact(lose_and_restore(4, 2, 0, {}), 4);
  }
  SECTION("overlapped: the rounds sent on a group of their own beside the steps") {
    check_exact(lose_and_restore(7, 2, 2, {}, 1, true), 6);
  }
  SECTION("buddies two ranks apart (another node): rank 3's copy on rank 1") {
    check_exact(lose_and_restore(5, 1, 3, {}, 2), 5);
  }
  SECTION("the newest round cut short where it mattered: the round before") {
    const Outcome o = lose_and_restore(6, 2, 2, [](int rank, MirrorHold& hold) {
      if (rank == 3) hold.newest.mirrored = false;  // rank 2's round of step 6 never reached rank 3
    });
    check_exact(o, 4);
  }
}

TEST_CASE("buddy mirror: an owner and its buddy both lost leaves no round to go on from", "[sharded][mirror]") {
  const Outcome o = lose_and_restore(3, 1, 1, [](int rank, MirrorHold& hold) {
    if (rank == 2) hold = MirrorHold{};  // rank 2 lost too
  });
  CHECK(o.chosen == -1);
}

TEST_CASE("buddy mirror: the buddy distance puts every copy on another node where the placement allows",
          "[sharded][mirror]") {
  CHECK(choose_buddy_distance({7, 8, 9, 10}) == 1);  // a node each
  CHECK(choose_buddy_distance({7, 8, 9, 7}) == 2);   // spread over 3 nodes: ranks 3 and 0 share one
  CHECK(choose_buddy_distance({7, 7, 8, 8}) == 2);   // packed two by two
  CHECK(choose_buddy_distance({7, 8, 7, 8}) == 1);
  CHECK(choose_buddy_distance({7, 7, 7, 7}) == 1);   // one node: no choice
  CHECK(choose_buddy_distance({7, 7, 7, 8}) == 1);   // a node with over half: none keeps every copy apart
  // With distance 2, rank 2's buddy is rank 0: rank 0's mirror covers it.
  CHECK(choose_mirror_step({MirrorReport{-1, 3, false, true, 2}, MirrorReport{-1, 3, false, true, 2}, MirrorReport{},
                            MirrorReport{-1, 3, false, true, 2}}) == 3);
  // Ranks 2 and 3 (one node, packed two by two) both lost: their copies are on ranks 0 and 1.
  CHECK(choose_mirror_step({MirrorReport{-1, 3, false, true, 2}, MirrorReport{-1, 3, false, true, 2}, MirrorReport{},
                            MirrorReport{}}) == 3);
  // At distance 1 the same loss takes rank 2's shard and its copy (on rank 3).
  CHECK(choose_mirror_step({MirrorReport{-1, 3, false, true, 1}, MirrorReport{-1, 3, false, true, 1}, MirrorReport{},
                            MirrorReport{}}) == -1);
}
