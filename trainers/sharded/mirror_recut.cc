#include "trainers/sharded/mirror_recut.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "trainers/sharded/mirror_record.h"

namespace troupe {
namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;
using mirror_record::collective_options;

// What this rank can send of round `step`: the old rank whose own record it holds, and the one
// whose copy it received (-1: none).
struct Offer {
  int64_t own = -1, buddy = -1;
};

Offer offer_of(const MirrorResume& at, size_t record_floats) {
  Offer o;
  const MirrorHold* hold = at.hold;
  const MirrorRound* round = hold ? hold->round_of(at.step) : nullptr;
  if (!round || hold->world != at.from_world || hold->rank < 0) return o;
  if (round->own.size() == record_floats) o.own = hold->rank;
  if (round->mirrored && round->buddy.size() == record_floats)
    o.buddy = ((hold->rank - hold->distance) % hold->world + hold->world) % hold->world;
  return o;
}

// For each old rank, the lowest new rank holding its own record, else the lowest holding its copy.
Expected<std::vector<int>> choose_senders(collectives::Communicator& comm, const Offer& mine, int from_world,
                                          std::chrono::milliseconds timeout) {
  auto all = mirror_record::gather_int64s(comm, {mine.own, mine.buddy}, timeout);
  if (!all.ok()) return all.status().with_context("telling the records held");
  std::vector<int> owner(static_cast<size_t>(from_world), -1), buddy(static_cast<size_t>(from_world), -1);
  for (int r = comm.size() - 1; r >= 0; --r) {
    const Offer o{(*all)[2 * static_cast<size_t>(r)], (*all)[2 * static_cast<size_t>(r) + 1]};
    if (o.own >= 0 && o.own < from_world) owner[static_cast<size_t>(o.own)] = r;
    if (o.buddy >= 0 && o.buddy < from_world) buddy[static_cast<size_t>(o.buddy)] = r;
  }
  for (int j = 0; j < from_world; ++j) {
    if (owner[j] < 0) owner[j] = buddy[j];
    if (owner[j] < 0)
      return internal_error("no rank holds old rank " + std::to_string(j) + "'s record, which the choice of the round "
                            "said survives");
  }
  return owner;
}

// Copies the floats of `from` (laid out over `from_ranges`, one after another) that fall in
// `to_ranges` into `to` (laid out over those the same way).
void copy_overlap(const float* from, const Ranges& from_ranges, float* to, const Ranges& to_ranges) {
  size_t from_at = 0;
  for (const auto& [fb, fe] : from_ranges) {
    size_t to_at = 0;
    for (const auto& [tb, te] : to_ranges) {
      const size_t b = std::max(fb, tb), e = std::min(fe, te);
      if (b < e) std::copy(from + from_at + (b - fb), from + from_at + (e - fb), to + to_at + (b - tb));
      to_at += te - tb;
    }
    from_at += fe - fb;
  }
}

size_t floats_in(const Ranges& ranges) {
  size_t n = 0;
  for (const auto& [b, e] : ranges) n += e - b;
  return n;
}

}  // namespace

Expected<MirrorStart> restore_recut(collectives::Communicator& comm, ShardedState& zero, bool whole_params,
                                    float* params, const MirrorResume& at, std::chrono::milliseconds timeout) {
  const int from = at.from_world;
  const size_t vectors = zero.optimizer_vectors();
  const size_t record_floats = mirror_record::floats_for(floats_in(zero.owned_ranges_of(0, from)), vectors);
  const std::string restoring = "restoring the sharded state of step " + std::to_string(at.step) + " from the mirrors "
                                "of " + std::to_string(from) + " ranks, re-cut for " + std::to_string(comm.size());
  const Offer mine = offer_of(at, record_floats);
  auto senders = choose_senders(comm, mine, from, timeout);
  if (!senders.ok()) return senders.status().with_context(restoring);

  const Ranges owned = zero.owned_ranges();
  const size_t owned_floats = floats_in(owned);
  std::vector<float> owned_params(whole_params ? 0 : owned_floats);
  OptimizerState opt = zero.owned_optimizer();  // its name; the numbers below
  opt.vectors.assign(vectors, std::vector<float>(owned_floats));
  const Ranges all_floats = zero.owned_ranges_of(0, 1);  // one rank owning everything: every bucket
  const Ranges whole = {{0, all_floats.empty() ? 0 : all_floats.back().second}};
  std::vector<float> record(record_floats);
  MirrorStart out;
  int64_t optimizer_steps = 0;  // the largest any record tells (a rank owning nothing wrote 0)
  for (int j = 0; j < from; ++j) {
    const int sender = (*senders)[static_cast<size_t>(j)];
    if (comm.rank() == sender) {
      const MirrorRound* round = at.hold->round_of(at.step);
      record = mine.own == j ? round->own : round->buddy;
    }
    TROUPE_RETURN_IF_ERROR(comm.broadcast(record.data(), record_floats, DType::f32, sender, collective_options(timeout))
                               .with_context(restoring + ": old rank " + std::to_string(j) + "'s record from rank " +
                                             std::to_string(sender)));
    if (mirror_record::get(record.data(), mirror_record::kStep) != at.step)
      return internal_error(restoring + ": old rank " + std::to_string(j) + "'s record is of step " +
                            std::to_string(mirror_record::get(record.data(), mirror_record::kStep)));
    const Ranges theirs = zero.owned_ranges_of(j, from);
    const size_t their_floats = floats_in(theirs);
    const float* their_params = record.data() + mirror_record::kHeaderFloats;
    optimizer_steps = std::max(optimizer_steps, mirror_record::get(record.data(), mirror_record::kOptimizerSteps));
    if (whole_params) copy_overlap(their_params, theirs, params, whole);
    else copy_overlap(their_params, theirs, owned_params.data(), owned);
    for (size_t v = 0; v < vectors; ++v)
      copy_overlap(their_params + (1 + v) * their_floats, theirs, opt.vectors[v].data(), owned);
    if (comm.rank() != sender)
      out.bytes += static_cast<int64_t>(mirror_record::floats_for(their_floats, vectors) * sizeof(float));
  }
  out.step = at.step;
  out.epoch = static_cast<int>(mirror_record::get(record.data(), mirror_record::kEpoch));
  out.epoch_step = mirror_record::get(record.data(), mirror_record::kEpochStep);
  opt.steps = optimizer_steps;
  TROUPE_RETURN_IF_ERROR(zero.load_owned_optimizer(opt).with_context(restoring));
  if (!whole_params) zero.load_owned_params(owned_params.data());
  auto bytes = mirror_record::sum_over_ranks(comm, out.bytes, timeout);
  if (!bytes.ok()) return bytes.status().with_context(restoring + ": gathering the bytes moved");
  out.bytes = *bytes;
  return out;
}

}  // namespace troupe
