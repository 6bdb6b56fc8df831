#include "trainers/job/tagged_rows.h"

namespace troupe::job {

Status gather_tagged_rows(const Dataset& train, const data::ShardPlanOptions& plan_options, const DataTag& tag,
                          std::map<int, data::ShardPlan>* plans, TaggedRows* out, const ExampleTransform& transform) {
  out->inputs.clear();
  out->labels.clear();
  out->targets.clear();
  out->origin.clear();
  out->rows = 0;
  out->width = train.target_width;
  const int64_t features = train.features();
  const size_t width = static_cast<size_t>(train.target_width);
  for (const DataSpan& d : tag) {
    auto it = plans->find(d.epoch);
    if (it == plans->end()) {
      auto plan = data::plan_epoch(train.count, train.class_labels(), train.classes, plan_options, d.epoch);
      if (!plan.ok()) return plan.status().with_context("planning epoch " + std::to_string(d.epoch));
      it = plans->emplace(d.epoch, std::move(*plan)).first;
    }
    const auto& shards = it->second.shards;
    if (d.shard < 0 || d.shard >= static_cast<int>(shards.size()) || d.offset < 0 || d.rows < 0 ||
        d.offset + d.rows > static_cast<int64_t>(shards[static_cast<size_t>(d.shard)].size()))
      return internal_error("the data of a push (" + describe(tag) + ") is outside this worker's plan of epoch " +
                            std::to_string(d.epoch) + ": were the servers started for another dataset?");
    const auto& indices = shards[static_cast<size_t>(d.shard)];
    for (int64_t r = d.offset; r < d.offset + d.rows; ++r) {
      const int32_t idx = indices[static_cast<size_t>(r)];
      const size_t at = out->inputs.size();
      out->inputs.resize(at + static_cast<size_t>(features));
      const size_t y = static_cast<size_t>(out->rows) * width;
      if (train.classifies()) out->labels.resize(y + width);
      else out->targets.resize(y + width);
      copy_example(train, idx, out->inputs.data() + at, train.classifies() ? out->labels.data() + y : nullptr,
                   train.classifies() ? nullptr : out->targets.data() + y);
      ++out->rows;
      if (transform) transform(d.epoch, idx, out->inputs.data() + at);
      out->origin.emplace_back(d.epoch, idx);
    }
  }
  return {};
}

}  // namespace troupe::job
