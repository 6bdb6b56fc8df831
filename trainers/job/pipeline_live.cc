#include "trainers/job/pipeline_live.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

namespace troupe::job {
namespace {

// int64 values gathered as raw bits (two f32 slots each: an all-gather only copies them).
Status gather_ints(collectives::Communicator& comm, const std::vector<int64_t>& mine, std::vector<int64_t>* all,
                   std::chrono::milliseconds timeout, const char* what) {
  collectives::CollectiveOptions co;
  co.timeout = timeout;
  all->assign(mine.size() * static_cast<size_t>(comm.size()), 0);
  std::vector<float> in(2 * mine.size()), out(2 * all->size());
  std::memcpy(in.data(), mine.data(), mine.size() * sizeof(int64_t));
  TROUPE_RETURN_IF_ERROR(comm.allgather(in.data(), out.data(), in.size(), DType::f32, co).with_context(what));
  std::memcpy(all->data(), out.data(), all->size() * sizeof(int64_t));
  return {};
}

}  // namespace

namespace {

// Whether some worker can give stage `s`'s state of `step`.
bool covered(const std::vector<StageOffer>& offers, int s, int64_t step) {
  for (const StageOffer& o : offers)
    if ((o.stage == s && o.holds(step)) || o.mirrors(s, step)) return true;
  return false;
}

}  // namespace

int64_t choose_pipeline_step(const std::vector<StageOffer>& offers, int stages, std::string* why) {
  std::vector<int64_t> newest(static_cast<size_t>(stages), -1), steps;
  for (const StageOffer& o : offers) {
    if (o.stage >= 0 && o.stage < stages)
      newest[o.stage] = std::max({newest[o.stage], o.newest, o.own_newest});
    if (o.mirror_stage >= 0 && o.mirror_stage < stages)
      newest[o.mirror_stage] = std::max(newest[o.mirror_stage], o.mirror_newest);
    for (int64_t step : {o.oldest, o.newest, o.own_older, o.own_newest, o.mirror_older, o.mirror_newest})
      if (step >= 0) steps.push_back(step);
    if (o.oldest >= 0)
      for (int64_t step = o.oldest + 1; step < o.newest; ++step) steps.push_back(step);
  }
  for (int s = 0; s < stages; ++s)
    if (newest[s] < 0) {
      *why = "no survivor holds stage " + std::to_string(s) + "'s state (every worker of it lost, and any copy)";
      return -1;
    }
  std::sort(steps.rbegin(), steps.rend());
  for (int64_t step : steps) {
    bool all = true;
    for (int s = 0; s < stages && all; ++s) all = covered(offers, s, step);
    if (all) return step;
  }
  // None: name the first stage missing the step every stage reached.
  const int64_t reached = *std::min_element(newest.begin(), newest.end());
  for (int s = 0; s < stages; ++s)
    if (!covered(offers, s, reached)) {
      *why = "no survivor of stage " + std::to_string(s) + " holds step " + std::to_string(reached) +
             " (the step every stage reached), and no older step is held by every stage";
      return -1;
    }
  *why = "no step is held by every stage";
  return -1;
}

namespace {

// Step 3 for a stage none of whose workers holds `step`: the lowest worker mirroring it sends it
// over the job's group; that stage's workers take it. -1: no such stage.
int mirror_source(const std::vector<StageOffer>& offers, int stage, int64_t step) {
  for (const StageOffer& o : offers)
    if (o.stage == stage && o.holds(step)) return -1;
  for (size_t r = 0; r < offers.size(); ++r)
    if (offers[r].mirrors(stage, step)) return static_cast<int>(r);
  return -1;
}

}  // namespace

Expected<LiveStart> agree_stage_state(collectives::Communicator& job, collectives::Communicator* stage_group,
                                      int stage, int stages, pipeline::StageHold& hold,
                                      std::chrono::milliseconds timeout) {
  const pipeline::MirroredStage& m = hold.mirror;
  std::vector<int64_t> all;
  const pipeline::MirroredStage& own = hold.own;
  const bool rounds = hold.held && own.newest_step() >= 0;
  // (A round's older is the newest until a second round came: then one round, not two.)
  auto older = [](const pipeline::MirroredStage& x) { return x.oldest_step() == x.newest_step() ? -1 : x.oldest_step(); };
  TROUPE_RETURN_IF_ERROR(gather_ints(job, {stage, hold.oldest_step(), hold.newest_step(), m.stage(), older(m),
                                           m.newest_step(), rounds ? older(own) : -1, rounds ? own.newest_step() : -1},
                                     &all, timeout, "telling the stages' steps held"));
  std::vector<StageOffer> offers;
  bool any = false;
  constexpr size_t kOffer = 8;
  for (size_t r = 0; r + kOffer - 1 < all.size(); r += kOffer) {
    offers.push_back({static_cast<int>(all[r]), all[r + 1], all[r + 2], static_cast<int>(all[r + 3]), all[r + 4],
                      all[r + 5], all[r + 6], all[r + 7]});
    any = any || all[r + 2] >= 0;
  }
  LiveStart out;
  std::string why;
  const int64_t step = any ? choose_pipeline_step(offers, stages, &why) : -1;
  if (step < 0) {
    if (any && job.rank() == 0) spdlog::warn("pipeline: {}: going on from the checkpoint", why);
    hold = pipeline::StageHold{};
    return out;
  }
  for (const StageOffer& o : offers) out.receivers += o.holds(step) ? 0 : 1;
  HeldState mine;
  mine.held = hold.holds(step);
  if (mine.held) mine.state = hold.take(step);
  int64_t stage_bytes = 0;
  if (stage_group) {  // the stage's replicas: the lowest holding the step sends it (none holding: nothing)
    auto shared = share_held_state(*stage_group, mine.held ? &mine : nullptr, timeout);
    if (!shared.ok()) return shared.status();
    if (shared->live) {
      out.state = std::move(shared->state);
      stage_bytes = shared->bytes;
    }
  } else if (mine.held) {
    out.state = std::move(mine.state);
  }
  // Stages none of whose workers holds the step: from the lowest worker mirroring each, in stage order.
  for (int s = 0; s < stages; ++s) {
    const int source = mirror_source(offers, s, step);
    if (source < 0) continue;
    HeldState copy;
    copy.held = job.rank() == source;
    if (copy.held) copy.state = hold.mirror.state(step);
    auto shared = share_held_state(job, copy.held ? &copy : nullptr, timeout);
    if (!shared.ok()) return shared.status().with_context("taking stage " + std::to_string(s) + "'s mirrored state");
    if (s == stage) {
      out.state = std::move(shared->state);
      stage_bytes = shared->bytes;
    }
  }
  hold = pipeline::StageHold{};
  // The bytes each stage's source sent, summed over the stages (told by every worker; one per stage counted).
  TROUPE_RETURN_IF_ERROR(gather_ints(job, {stage, stage_bytes}, &all, timeout, "telling the bytes moved"));
  std::vector<int64_t> per_stage(static_cast<size_t>(stages), 0);
  for (size_t r = 0; r + 1 < all.size(); r += 2) per_stage[static_cast<size_t>(all[r])] = all[r + 1];
  out.bytes = 0;
  for (int64_t b : per_stage) out.bytes += b;
  out.live = true;
  out.source = -1;
  out.from = "the memory of each stage's other replicas or buddy (step " + std::to_string(step) + ")";
  return out;
}

}  // namespace troupe::job
