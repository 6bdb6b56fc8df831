#include "trainers/job/ps_takeover.h"

#include <algorithm>
#include <map>
#include <utility>

#include <spdlog/spdlog.h>

#include "trainers/job/tagged_rows.h"
#include "trainers/trainer_setup.h"

namespace troupe::job {
namespace {

// Pushes the batch `tag` names again, at `clock`, to `lagging` only, from freshly pulled parameters.
Status catch_up(ps::PsClient& client, const TrainOptions& options, const Dataset& train,
                const data::ShardPlanOptions& plan, int rank, int workers, int64_t clock, const DataTag& tag,
                const std::vector<int>& lagging) {
  std::map<int, data::ShardPlan> plans;
  TaggedRows rows;
  TROUPE_RETURN_IF_ERROR(gather_tagged_rows(train, plan, tag, &plans, &rows));
  auto setup = set_up_trainer(options, DataSpec{train.features(), train.classes}, rank, workers);
  if (!setup.ok()) return setup.status();
  const size_t n = setup->space.size();
  if (client.parameters() != n)
    return invalid_argument("the parameter servers hold " + std::to_string(client.parameters()) + " parameters but " +
                            setup->where + " declares " + std::to_string(n));
  std::vector<float> params(n), grads(n, 0.0f);
  auto versions = client.pull(clock, params.data());
  if (!versions.ok()) return versions.status().with_context("pulling the parameters to recompute it");
  Gradients grad_view(grads.data(), n);
  auto stats = setup->trainer->forward_backward(rows.batch(train.features()), Parameters(params.data(), n), grad_view);
  if (!stats.ok()) return stats.status().with_context(setup->where + ": forward_backward");
  return client.push_to(lagging, clock, grads.data(), *versions, tag);
}

}  // namespace

Expected<TakeOver> take_over(ps::PsClient& client, const TrainOptions& options, const Dataset& train,
                             const data::ShardPlanOptions& plan, data::ShardLedger& ledger, WorkerId me, int rank,
                             int workers) {
  const std::string who = "worker " + std::to_string(rank) + " (replacing a failed one)";
  const std::vector<ps::WorkerPosition> at = client.positions();
  int64_t top = 0;
  for (const ps::WorkerPosition& p : at) top = std::max(top, p.clock);
  const ps::WorkerPosition* ahead = nullptr;
  std::vector<int> lagging;
  for (size_t i = 0; i < at.size(); ++i) {
    if (at[i].clock == top) {
      if (ahead && !(ahead->last == at[i].last))
        return internal_error(who + ": the parameter servers at clock " + std::to_string(top) +
                              " disagree on its predecessor's last push (" + describe(ahead->last) + " against " +
                              describe(at[i].last) + " on server " + std::to_string(i) + "); the data accounting "
                              "cannot go on. Report this with the servers' logs");
      ahead = &at[i];
    } else if (at[i].clock == top - 1) {
      lagging.push_back(static_cast<int>(i));
    } else {
      spdlog::warn("{}: parameter server {} is at clock {}, more than one push behind the others' {} (restored from "
                   "a checkpoint): its data record is not caught up", who, i, at[i].clock, top);
    }
  }
  TakeOver t;
  const DataTag last = ahead ? ahead->last : DataTag{};
  if (!lagging.empty() && !last.empty()) {
    TROUPE_RETURN_IF_ERROR(catch_up(client, options, train, plan, rank, workers, top - 1, last, lagging)
                               .with_context(who + ": pushing its predecessor's last push (clock " +
                                             std::to_string(top - 1) + ", " + describe(last) + ") to the " +
                                             std::to_string(lagging.size()) + " server(s) that lack it"));
    t.caught_up = static_cast<int>(lagging.size());
  } else if (!lagging.empty()) {
    spdlog::warn("{}: {} server(s) lack the predecessor's last push, which carries no data tag: not recomputed", who,
                 lagging.size());
  }
  // Where each shard of the last push ends; its other shards resume where their claims started.
  std::map<std::pair<int, int>, int64_t> ends;
  for (const DataSpan& d : last) {
    int64_t& e = ends[{d.epoch, d.shard}];
    e = std::max(e, d.offset + d.rows);
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
                           : std::string());
  return t;
}

}  // namespace troupe::job
