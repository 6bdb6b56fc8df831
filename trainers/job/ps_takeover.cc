#include "trainers/job/ps_takeover.h"

#include <algorithm>
#include <map>
#include <utility>

#include <spdlog/spdlog.h>

#include "trainers/job/tagged_rows.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::job {
namespace {

// The worker's trainer, to recompute pushes, checked against what the servers hold.
Expected<TrainerSetup> recomputing_trainer(const ps::PsClient& client, const TrainOptions& options,
                                           const Dataset& train, int rank, int workers) {
  auto setup = set_up_trainer(options, train.spec(), rank, workers);
  if (!setup.ok()) return setup.status();
  if (client.parameters() != setup->space.size())
    return invalid_argument("the parameter servers hold " + std::to_string(client.parameters()) + " parameters but " +
                            setup->where + " declares " + std::to_string(setup->space.size()));
  return setup;
}

// Pushes the batch `tag` names again, at `clock`, to `lagging` only, from freshly pulled parameters:
// as a push to live servers one clock behind, as a replay to restored ones (their clock for the
// rank is past it already: take_over moved it).
Status catch_up(ps::PsClient& client, const TrainOptions& options, const Dataset& train,
                const data::ShardPlanOptions& plan, int rank, int workers, int64_t clock, const DataTag& tag,
                const std::vector<int>& lagging, bool restored) {
  std::map<int, data::ShardPlan> plans;
  auto setup = recomputing_trainer(client, options, train, rank, workers);
  if (!setup.ok()) return setup.status();
  TaggedRows rows;
  BatchFields fields;
  TROUPE_RETURN_IF_ERROR(gather_tagged_rows(train, plan, tag, &plans, &rows, trainer_transform(*setup->trainer, options.seed)));
  const size_t n = setup->space.size();
  std::vector<float> params(n), grads(n, 0.0f);
  auto versions = client.pull(clock, params.data());
  if (!versions.ok()) return versions.status().with_context("pulling the parameters to recompute it");
  Gradients grad_view(grads.data(), n);
  auto stats = setup->trainer->forward_backward(rows.batch(train, &fields), Parameters(params.data(), n), grad_view);
  if (!stats.ok()) return stats.status().with_context(setup->where + ": forward_backward");
  if (!restored) return client.push_to(lagging, clock, grads.data(), *versions, tag);
  for (int i : lagging) TROUPE_RETURN_IF_ERROR(client.replay_on(i, clock, grads.data(), tag));
  return {};
}

// Server `i` came back restored from a checkpoint without the predecessor's pushes after
// `after` (up to `last`, the newest any server applied): asks server `ahead` (which applied them
// all) for their tags and replays each, recomputed from parameters pulled just before it, to `i` alone.
// The pull at `clock` (the predecessor's) first has `i` count the rank's pushes up to there, so
// the replays lie between what it applied and the rank's clock. Returns the pushes replayed; a
// history the ahead server no longer holds is logged and left to the job's accounting.
Expected<int> replay_lost(ps::PsClient& client, const TrainOptions& options, const Dataset& train,
                          const data::ShardPlanOptions& plan, int rank, int workers, int64_t clock, int i, int ahead,
                          int64_t after, int64_t last) {
  auto history = client.pushes_after(ahead, after);
  if (!history.ok()) return history.status().with_context("asking server " + std::to_string(ahead) + " for them");
  if (!history->complete || history->pushes.empty() || history->pushes.front().clock != after + 1 ||
      history->pushes.back().clock < last) {
    spdlog::warn("worker {}: parameter server {} was restored without its predecessor's pushes of clocks {}..{}, and "
                 "server {} no longer keeps them all ({} kept{}): they stay lost to it; the job's accounting names them",
                 rank, i, after + 1, last, ahead, history->pushes.size(),
                 history->pushes.empty() ? "" : ", from clock " + std::to_string(history->pushes.front().clock));
    return 0;
  }
  auto setup = recomputing_trainer(client, options, train, rank, workers);
  if (!setup.ok()) return setup.status();
  const size_t n = setup->space.size();
  std::vector<float> params(n), grads(n);
  std::map<int, data::ShardPlan> plans;
  int replayed = 0;
  for (const ps::TaggedPush& p : history->pushes) {
    if (p.clock > last) break;
    // Each from the parameters as the replays so far left them (one stale point for them all
    // costs accuracy: ps_client.h).
    auto versions = client.pull(clock, params.data());
    if (!versions.ok()) return versions.status().with_context("pulling the parameters to recompute clock " +
                                                              std::to_string(p.clock));
    TaggedRows rows;
    BatchFields fields;
    TROUPE_RETURN_IF_ERROR(
        gather_tagged_rows(train, plan, p.tag, &plans, &rows, trainer_transform(*setup->trainer, options.seed)));
    std::fill(grads.begin(), grads.end(), 0.0f);
    Gradients grad_view(grads.data(), n);
    if (!p.tag.empty()) {
      auto stats = setup->trainer->forward_backward(rows.batch(train, &fields), Parameters(params.data(), n), grad_view);
      if (!stats.ok()) return stats.status().with_context(setup->where + ": forward_backward of clock " + std::to_string(p.clock));
    }
    TROUPE_RETURN_IF_ERROR(client.replay_on(i, p.clock, grads.data(), p.tag)
                               .with_context("replaying clock " + std::to_string(p.clock) + " (" + describe(p.tag) + ")"));
    ++replayed;
  }
  return replayed;
}

// Where each shard of `tag` ends (the last example of it the tag covers, + 1).
std::map<std::pair<int, int>, int64_t> shard_ends(const DataTag& tag) {
  std::map<std::pair<int, int>, int64_t> ends;
  for (const DataSpan& d : tag) {
    int64_t& e = ends[{d.epoch, d.shard}];
    e = std::max(e, d.offset + d.rows);
  }
  return ends;
}

// The shards `me` completed whose examples after the push `last` no server applied: the rest of
// each shard of `last`, and every shard it completed after them (a worker claims the lowest free
// shard, so in `last`'s epoch those numbered above it, and any in a later epoch), reopened at their
// claims' start. Returns "epoch E shard S at N/M" for each reopened.
Expected<std::vector<std::string>> reopen_lost(data::ShardLedger& ledger, WorkerId me, const DataTag& last,
                                               const std::map<std::pair<int, int>, int64_t>& ends) {
  int first_epoch = 0, last_shard = -1;
  for (const DataSpan& d : last) {
    if (d.epoch > first_epoch) {
      first_epoch = d.epoch;
      last_shard = d.shard;
    } else if (d.epoch == first_epoch) {
      last_shard = std::max(last_shard, d.shard);
    }
  }
  std::vector<std::string> out;
  for (int epoch = first_epoch;; ++epoch) {
    auto records = ledger.epoch_status(epoch);
    if (!records.ok()) {
      if (records.status().code() == Code::not_found) break;  // no later epoch was begun
      return records.status();
    }
    for (const gcs::ShardRecord& r : *records) {
      if (r.state != gcs::ShardState::done || r.owner != me) continue;
      int64_t from = r.resume_at;  // where its claim started
      if (auto e = ends.find({epoch, r.shard}); e != ends.end()) {
        from = e->second;
      } else if (epoch == first_epoch && r.shard < last_shard) {
        continue;  // completed before the last push (and applied)
      }
      if (from >= r.examples) continue;  // the last push ended it
      auto reopened = ledger.reopen(epoch, r.shard, me, from);
      if (!reopened.ok()) return reopened.status();
      if (*reopened)
        out.push_back("epoch " + std::to_string(epoch) + " shard " + std::to_string(r.shard) + " at " +
                      std::to_string(from) + "/" + std::to_string(r.examples));
    }
  }
  return out;
}

}  // namespace

Expected<TakeOver> take_over(ps::PsClient& client, const TrainOptions& options, const Dataset& train,
                             const data::ShardPlanOptions& plan, data::ShardLedger& ledger, WorkerId me, int rank,
                             int workers) {
  const std::string who = "worker " + std::to_string(rank) + " (replacing a failed one)";
  const std::vector<ps::WorkerPosition> at = client.positions();
  TakeOver t;
  int64_t top = 0, record_top = 0;
  for (const ps::WorkerPosition& p : at) {
    top = std::max(top, p.clock);
    record_top = std::max(record_top, p.last_clock + 1);
  }
  // Every server came back from a checkpoint: their clocks for the rank start again at 0, their
  // records end where each one's checkpoint caught the predecessor. The rank goes on after the
  // newest of those records: a pull at that clock moves every server's clock for it there.
  const bool all_restored = record_top > top;
  if (all_restored) {
    std::vector<float> params(client.parameters());
    auto raised = client.pull(record_top, params.data());
    if (!raised.ok())
      return raised.status().with_context(who + ": moving its clock on every restored server to " +
                                          std::to_string(record_top));
    top = record_top;
    t.start_clock = top;
  }
  // The predecessor's last push has clock top - 1. A server whose record of the rank ends one push
  // before it lacks only that push: the predecessor died between servers, or (every server
  // restored) the checkpoints of one version caught the rank one push apart on different servers
  // (a push is in flight to all of them at once). It gets that push again. A server whose record
  // ends earlier came back restored from a checkpoint (its node died with the predecessor's) while
  // another server applied them all: it gets every push after its record replayed.
  const ps::WorkerPosition* ahead = nullptr;
  int ahead_index = -1;
  std::vector<int> lagging, restored;
  for (size_t i = 0; i < at.size(); ++i) {
    const int64_t clock = all_restored ? top : at[i].clock;
    if (at[i].last_clock == top - 1 && (clock == top || all_restored)) {
      if (ahead && !(ahead->last == at[i].last))
        return internal_error(who + ": the parameter servers at clock " + std::to_string(top) +
                              " disagree on its predecessor's last push (" + describe(ahead->last) + " against " +
                              describe(at[i].last) + " on server " + std::to_string(i) + "); the data accounting "
                              "cannot go on. Report this with the servers' logs");
      ahead = &at[i];
      ahead_index = static_cast<int>(i);
    } else if (at[i].last_clock == top - 2 && (clock == top - 1 || all_restored)) {
      lagging.push_back(static_cast<int>(i));
    } else if (at[i].last_clock < top - 1) {
      restored.push_back(static_cast<int>(i));
    }
  }
  const DataTag last = ahead ? ahead->last : DataTag{};
  if (!lagging.empty() && !last.empty()) {
    TROUPE_RETURN_IF_ERROR(catch_up(client, options, train, plan, rank, workers, top - 1, last, lagging, all_restored)
                               .with_context(who + ": pushing its predecessor's last push (clock " +
                                             std::to_string(top - 1) + ", " + describe(last) + ") to the " +
                                             std::to_string(lagging.size()) + " server(s) that lack it"));
    t.caught_up = static_cast<int>(lagging.size());
  } else if (!lagging.empty()) {
    spdlog::warn("{}: {} server(s) lack the predecessor's last push, which carries no data tag: not recomputed", who,
                 lagging.size());
  }
  for (int i : restored) {
    const int64_t after = at[static_cast<size_t>(i)].last_clock;
    auto replayed = replay_lost(client, options, train, plan, rank, workers, top, i, ahead_index, after, top - 1);
    if (!replayed.ok())
      return replayed.status().with_context(who + ": replaying its predecessor's pushes of clocks " +
                                            std::to_string(after + 1) + ".." + std::to_string(top - 1) +
                                            " to parameter server " + std::to_string(i) + ", restored without them");
    t.replayed += *replayed;
    if (*replayed > 0) ++t.servers_replayed;
  }
  // Where each shard of the last push ends; its other shards resume where their claims started.
  const std::map<std::pair<int, int>, int64_t> ends = shard_ends(last);
  // Every server came back from a checkpoint and (caught up above) none applied more of the rank
  // than the others: what the predecessor trained after that push is lost on all of them alike and
  // nobody can replay it, so it is trained again — the rest of the last push's shard and every later
  // shard the predecessor completed (those it still held are released below).
  if (all_restored && !last.empty()) {
    auto reopened = reopen_lost(ledger, me, last, ends);
    if (!reopened.ok()) return reopened.status().with_context(who + ": giving back the shards its servers lost");
    t.reopened = static_cast<int>(reopened->size());
    for (const std::string& w : *reopened) t.reopened_where += (t.reopened_where.empty() ? "" : ", ") + w;
  }
  auto released = ledger.release_worker(me, [&](const gcs::ShardRecord& r) {
    auto it = ends.find({r.epoch, r.shard});
    return it != ends.end() ? it->second : r.resume_at;
  });
  if (!released.ok()) return released.status().with_context(who + ": releasing the shards its predecessor held");
  t.released = static_cast<int>(released->size());
  std::string where;
  for (const gcs::ShardRecord& r : *released) {
    t.resumed_mid_shard += r.resume_at > 0;
    where += (where.empty() ? "" : ", ") + std::string("epoch ") + std::to_string(r.epoch) + " shard " +
             std::to_string(r.shard) + " at " + std::to_string(r.resume_at) + "/" + std::to_string(r.examples);
  }
  // A predecessor killed between two shards (one finished, the next not yet claimed) held none.
  t.summary = who + ": " +
              (t.released == 0 ? std::string("its failed predecessor held no shards (it died between two), none to give "
                                              "back")
                               : std::to_string(t.released) + " shards its failed predecessor held back to the ledger, " +
                                     "each to resume where the parameter servers' applied data ends" +
                                     (where.empty() ? "" : " (" + where + ")")) +
              (t.caught_up ? "; its last push (" + describe(last) + ") pushed again to " + std::to_string(t.caught_up) +
                                 " server(s) that lacked it"
                           : std::string()) +
              (t.replayed ? "; " + std::to_string(t.replayed) + " of its pushes replayed to " +
                                std::to_string(t.servers_replayed) + " server(s) restored without them"
                          : std::string()) +
              (t.reopened ? "; every server restored without what it trained after " + describe(last) + ": " +
                                std::to_string(t.reopened) + " shard(s) it had completed trained again (" +
                                t.reopened_where + ")"
                          : std::string());
  return t;
}

}  // namespace troupe::job
