#include "trainers/sharded/buddy_mirror.h"

#include <algorithm>
#include <set>

#include "trainers/sharded/mirror_record.h"

namespace troupe {
namespace {

using mirror_record::get;
using mirror_record::kEpoch;
using mirror_record::kEpochStep;
using mirror_record::kHeaderFloats;
using mirror_record::kOptimizerSteps;
using mirror_record::kStep;
using mirror_record::collective_options;
using mirror_record::put;
size_t record_floats(const ShardedState& zero, int rank) { return mirror_record::floats_of(zero, rank); }

}  // namespace

const MirrorRound* MirrorHold::round_of(int64_t step) const {
  if (step < 0) return nullptr;
  if (newest.step == step) return &newest;
  if (older.step == step) return &older;
  return nullptr;
}

MirrorReport report_of(const MirrorHold& hold) {
  MirrorReport r;
  r.older = hold.older.step;
  r.newest = hold.newest.step;
  r.older_mirrored = hold.older.mirrored;
  r.newest_mirrored = hold.newest.mirrored;
  r.distance = hold.distance;
  r.rank = hold.rank;
  r.world = hold.world;
  return r;
}

MirrorChoice choose_mirror_round(const std::vector<MirrorReport>& ranks) {
  std::set<int64_t, std::greater<int64_t>> steps;
  for (const MirrorReport& r : ranks) {
    if (r.older >= 0) steps.insert(r.older);
    if (r.newest >= 0) steps.insert(r.newest);
  }
  const int n = static_cast<int>(ranks.size());
  auto world_of = [&](int k) { return ranks[k].world > 0 ? ranks[k].world : n; };
  auto rank_of = [&](int k) { return ranks[k].rank >= 0 ? ranks[k].rank : k; };
  for (int64_t step : steps) {
    // The groups that took a round of this step (a rank may still hold an older generation's).
    std::set<int> worlds;
    for (int k = 0; k < n; ++k)
      if (ranks[k].holds(step)) worlds.insert(world_of(k));
    for (int world : worlds) {
      std::vector<bool> covered(static_cast<size_t>(world), false);
      bool same = world == n;
      for (int k = 0; k < n; ++k) {
        if (world_of(k) != world || rank_of(k) >= world) continue;  // rounds of another group
        if (ranks[k].holds(step)) covered[rank_of(k)] = true;
        if (ranks[k].mirrors(step)) covered[((rank_of(k) - ranks[k].distance) % world + world) % world] = true;
        if (ranks[k].holds(step) && rank_of(k) != k) same = false;
      }
      if (std::all_of(covered.begin(), covered.end(), [](bool c) { return c; })) return {step, world, same};
    }
  }
  return {};
}

int choose_buddy_distance(const std::vector<int64_t>& node_of_rank) {
  const int n = static_cast<int>(node_of_rank.size());
  for (int d = 1; d < n; ++d) {
    bool apart = true;
    for (int r = 0; r < n && apart; ++r) apart = node_of_rank[r] != node_of_rank[((r - d) % n + n) % n];
    if (apart) return d;
  }
  return 1;
}

BuddyMirror::BuddyMirror(collectives::Communicator& comm, ShardedState& zero, int64_t every, int distance,
                         std::chrono::milliseconds timeout, collectives::Communicator* own)
    : comm_(comm), zero_(zero), every_(std::max<int64_t>(every, 1)), distance_(distance), timeout_(timeout), own_(own) {
  record_floats_ = record_floats(zero, 0);  // rank 0 owns the most
  hold_.distance = distance;
  hold_.rank = comm.rank();
  hold_.world = comm.size();
  if (own_) thread_ = std::thread([this] { run(); });
}

BuddyMirror::~BuddyMirror() {
  if (!own_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // after the shift in flight, by its deadline at the latest
}

void BuddyMirror::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return posted_ || stop_; });
    if (!posted_) return;  // stopped
    lock.unlock();
    Status st = shift_newest(*own_);
    lock.lock();
    shifted_ = st;
    posted_ = false;
    cv_.notify_all();
  }
}

Status BuddyMirror::wait() {
  if (!own_) return {};
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !posted_; });
  return shifted_;
}

Status BuddyMirror::shift_newest(collectives::Communicator& comm) {
  MirrorRound& round = hold_.newest;
  TROUPE_RETURN_IF_ERROR(comm.shift(round.own.data(), round.buddy.data(), record_floats_, DType::f32, distance_,
                                    collective_options(timeout_))
                             .with_context("mirroring the sharded state of step " + std::to_string(round.step) +
                                           " to rank +" + std::to_string(distance_)));
  round.mirrored = true;
  return {};
}

void BuddyMirror::write_own(MirrorRound& round, const float* params, int64_t step, int epoch, int64_t epoch_step) {
  // Written in place over the round's buffer (allocated once): the header, the owned parameters,
  // the optimizer vectors straight from the optimizers, zeros after.
  round.own.resize(record_floats_);
  float* at = round.own.data();
  put(at, kStep, step);
  put(at, kEpoch, epoch);
  put(at, kEpochStep, epoch_step);
  put(at, kOptimizerSteps, zero_.steps());
  at += kHeaderFloats;
  for (const auto& [begin, end] : zero_.owned_ranges()) at = std::copy(params + begin, params + end, at);
  at = zero_.copy_owned_optimizer(at);
  std::fill(at, round.own.data() + round.own.size(), 0.0f);
  round.step = step;
  round.mirrored = false;
}

Status BuddyMirror::after_step(const float* params, int64_t step, int epoch, int64_t epoch_step) {
  if (started_ && step % every_ != 0) return {};
  TROUPE_RETURN_IF_ERROR(wait());  // (normally over: the step's first collective waited for it)
  // Having got here, every rank finished the newest round (the steps since needed them all): it
  // becomes the older, and the new round is written over the buffers of the one before.
  if (started_) std::swap(hold_.older, hold_.newest);
  started_ = true;
  MirrorRound& round = hold_.newest;
  write_own(round, params, step, epoch, epoch_step);
  round.buddy.resize(record_floats_);
  if (own_) {  // the shift beside the next step's computation
    std::lock_guard<std::mutex> lock(mu_);
    posted_ = true;
    cv_.notify_all();
  } else {
    TROUPE_RETURN_IF_ERROR(shift_newest(comm_));
  }
  return {};
}

MirrorHold BuddyMirror::release() {
  Status st = wait();  // a failed shift leaves its round not mirrored
  (void)st;
  MirrorHold out = std::move(hold_);
  hold_ = MirrorHold{};
  hold_.distance = distance_;
  hold_.rank = comm_.rank();
  hold_.world = comm_.size();
  started_ = false;
  return out;
}

Expected<MirrorStart> restore_from_mirror(collectives::Communicator& comm, ShardedState& zero, bool whole_params,
                                          float* params, const MirrorResume& at_round,
                                          std::chrono::milliseconds timeout) {
  const size_t floats = record_floats(zero, 0);
  const int64_t step = at_round.step;
  const int d = at_round.distance;
  const MirrorRound* mine = at_round.hold ? at_round.hold->round_of(step) : nullptr;
  // Every rank sends back the mirror it holds of rank r-d (zeros when it has none of `step`) and
  // receives rank r+d's mirror of itself: used when it lacks its own round.
  const MirrorRound* sent = mine && mine->mirrored && mine->buddy.size() == floats ? mine : nullptr;
  std::vector<float> none, back(floats);
  if (!sent) none.assign(floats, 0.0f);
  const std::string restoring = "restoring the sharded state of step " + std::to_string(step) + " from memory";
  TROUPE_RETURN_IF_ERROR(comm.shift(sent ? sent->buddy.data() : none.data(), back.data(), floats, DType::f32, -d,
                                    collective_options(timeout))
                             .with_context(restoring));
  MirrorStart out;
  const float* record = mine && mine->own.size() == floats ? mine->own.data() : back.data();
  if (record == back.data()) out.bytes = static_cast<int64_t>(record_floats(zero, comm.rank()) * sizeof(float));
  if (get(record, kStep) != step)
    return internal_error(restoring + ": rank " + std::to_string(comm.rank()) + "'s record " +
                          (record == back.data() ? "from rank " + std::to_string((comm.rank() + d) % comm.size()) : "") +
                          " is of step " + std::to_string(get(record, kStep)));
  out.step = step;
  out.epoch = static_cast<int>(get(record, kEpoch));
  out.epoch_step = get(record, kEpochStep);
  const size_t owned = zero.owned_floats(comm.rank());
  const float* owned_params = record + kHeaderFloats;
  if (!whole_params) {
    zero.load_owned_params(owned_params);
  } else {
    const float* from = owned_params;
    for (const auto& [begin, end] : zero.owned_ranges()) {
      std::copy(from, from + (end - begin), params + begin);
      from += end - begin;
    }
  }
  const float* at = owned_params + owned;
  OptimizerState opt = zero.owned_optimizer();  // its name and vectors' shape; the numbers below
  opt.steps = get(record, kOptimizerSteps);
  for (std::vector<float>& v : opt.vectors) {
    v.assign(at, at + owned);
    at += owned;
  }
  TROUPE_RETURN_IF_ERROR(zero.load_owned_optimizer(opt).with_context(restoring));
  if (whole_params)
    TROUPE_RETURN_IF_ERROR(zero.gather(params).with_context(restoring + ": gathering the whole parameters"));
  // The bytes every rank received for its chunks, summed.
  auto bytes = mirror_record::sum_over_ranks(comm, out.bytes, timeout);
  if (!bytes.ok()) return bytes.status().with_context(restoring + ": gathering the bytes moved");
  out.bytes = *bytes;
  return out;
}

}  // namespace troupe
