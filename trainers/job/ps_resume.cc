#include "trainers/job/ps_resume.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "data/shards/shard_ledger.h"
#include "trainers/job/tagged_rows.h"
#include "trainers/ps/applied_data.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::job {

Expected<ResumedData> resumed_data(const checkpoint::TrainingState& state, int servers, int workers) {
  const std::string what = "resuming an async job from the checkpoint of step " + std::to_string(state.step);
  if (state.extras.size() != static_cast<size_t>(servers))
    return invalid_argument(what + ": it was written by " + std::to_string(state.extras.size()) +
                            " parameter servers; this job has " + std::to_string(servers) +
                            " (resume with the old job's --ps)");
  ResumedData d;
  for (int s = 0; s < servers; ++s) {
    const std::string& bytes = state.extras[static_cast<size_t>(s)];
    if (bytes.empty())
      return corrupt_data(what + ": server " + std::to_string(s) + "'s shard file holds no record of the data it "
                          "applied (written by an older troupe?), so the job cannot go on exactly once");
    auto record = ps::AppliedData::decode(bytes, workers);
    if (!record.ok())
      return record.status().with_context(what + ", server " + std::to_string(s) + "'s record" +
                                          (record.status().code() == Code::invalid_argument
                                               ? " (resume with the old job's --workers)" : ""));
    for (const ps::AppliedShard& a : record->shards()) {
      int64_t& most = d.applied[{a.epoch, a.shard}];
      most = std::max(most, a.next);
      d.last_epoch = std::max(d.last_epoch, a.epoch);
    }
  }
  return d;
}

Expected<int64_t> catch_up_shard(ps::ParameterShard& shard, int index, const checkpoint::TrainingState& state,
                                 const ResumedData& data, const TrainOptions& options, const Dataset& train,
                                 const data::ShardPlanOptions& plan, int workers, int64_t batch_rows) {
  const std::string who = "parameter server " + std::to_string(index);
  // What this server had applied: its own record, which restore() took from the checkpoint.
  std::map<std::pair<int, int>, int64_t> mine;
  for (const ps::AppliedShard& a : shard.applied()) mine[{a.epoch, a.shard}] = a.next;
  shard.forget_workers();
  std::unique_ptr<Trainer> trainer;
  std::vector<float> grads;
  std::map<int, data::ShardPlan> plans;
  TaggedRows rows;
  BatchFields fields;
  int64_t batches = 0, examples = 0;
  for (const auto& [key, most] : data.applied) {
    for (int64_t from = mine.count(key) ? mine[key] : 0; from < most;) {
      const int64_t n = std::min(batch_rows, most - from);
      const DataTag tag{DataSpan{key.first, key.second, from, n}};
      if (!trainer) {
        auto setup = set_up_trainer(options, train.spec(), 0, workers);
        if (!setup.ok()) return setup.status().with_context(who + " catching up");
        if (setup->space.size() != state.params.size())
          return invalid_argument(who + ": the checkpoint holds " + std::to_string(state.params.size()) +
                                  " parameters; " + setup->where + " declares " + std::to_string(setup->space.size()));
        trainer = std::move(setup->trainer);
        grads.resize(state.params.size());
      }
      TROUPE_RETURN_IF_ERROR(gather_tagged_rows(train, plan, tag, &plans, &rows, trainer_transform(*trainer, options.seed))
                                 .with_context(who + " catching up"));
      std::fill(grads.begin(), grads.end(), 0.0f);
      Gradients g(grads.data(), grads.size());
      auto stats = trainer->forward_backward(rows.batch(train, &fields),
                                             Parameters(state.params.data(), state.params.size()), g);
      if (!stats.ok()) return stats.status().with_context(who + " catching up " + describe(tag));
      auto v = shard.catch_up(grads.data() + shard.range().begin, tag);
      if (!v.ok()) return v.status().with_context(who);
      ++batches;
      examples += n;
      from += n;
    }
  }
  if (batches > 0)
    spdlog::info("{}: caught up {} examples in {} batches that other servers of the checkpoint had applied", who,
                 examples, batches);
  return batches;
}

Status seed_ledger(gcs::Store& store, const JobId& job, const ResumedData& data, const Dataset& train,
                   const data::ShardPlanOptions& plan) {
  data::ShardLedger ledger(store, job, data::ShardLedgerOptions{plan.shards});
  for (int e = 1; e <= data.last_epoch; ++e) {
    auto p = data::plan_epoch(train.count, train.class_labels(), train.classes, plan, e);
    if (!p.ok()) return p.status().with_context("planning epoch " + std::to_string(e));
    const std::vector<int64_t> sizes = p->shard_sizes();
    std::vector<int64_t> trained(sizes.size(), 0);
    for (size_t s = 0; s < sizes.size(); ++s) {
      auto it = data.applied.find({e, static_cast<int>(s)});
      if (it != data.applied.end()) trained[s] = it->second;
    }
    TROUPE_RETURN_IF_ERROR(ledger.create_resumed_epoch(e, sizes, trained)
                               .with_context("recording epoch " + std::to_string(e) + " as the resumed job left it"));
  }
  return {};
}

Expected<int> first_open_epoch(gcs::Store& store, const JobId& job, int shards, int epochs) {
  data::ShardLedger ledger(store, job, data::ShardLedgerOptions{shards});
  for (int e = 1; e <= epochs; ++e) {
    auto done = ledger.epoch_done(e);
    if (!done.ok() && done.status().code() == Code::not_found) return e;
    if (!done.ok()) return done.status();
    if (!*done) return e;
  }
  return epochs;
}

}  // namespace troupe::job
