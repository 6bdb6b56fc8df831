#include "trainers/job/ledger_feed.h"

#include <algorithm>

#include "trainers/job/tagged_rows.h"

namespace troupe::job {
namespace {

// At most `limit` chunks of `inner` per epoch (sync: one shard each).
class LimitSource final : public data::IndexSource {
 public:
  LimitSource(std::unique_ptr<data::IndexSource> inner, int limit) : inner_(std::move(inner)), left_(limit) {}
  Expected<std::optional<data::IndexChunk>> next() override {
    if (left_ <= 0) return std::optional<data::IndexChunk>();
    --left_;
    return inner_->next();
  }

 private:
  std::unique_ptr<data::IndexSource> inner_;
  int left_;
};

}  // namespace

int shards_of(int rank, int world, int shards) {
  if (world < 1 || rank < 0 || rank >= world) return 0;
  return (shards - rank + world - 1) / world;
}

LedgerFeedOptions sync_feed_options(uint64_t seed, int64_t global_batch, int shards, int rank, int world) {
  LedgerFeedOptions fo;
  fo.plan.shards = shards;
  fo.plan.policy = data::ShardPolicy::interleaved;
  fo.plan.seed = seed;
  fo.plan.block = global_batch / shards;
  fo.batch_size = global_batch / shards;
  fo.one_shard_per_epoch = true;
  fo.shards_per_step = shards_of(rank, world, shards);
  for (int s = rank; s < shards && world > 0; s += world) fo.named_shards.push_back(s);
  return fo;
}

LedgerFeed::LedgerFeed(const Dataset& data, gcs::Store& store, JobId job, WorkerId worker, LedgerFeedOptions options)
    : data_(data),
      store_(store),
      job_(job),
      worker_(worker),
      options_(options),
      ledger_(store, job, data::ShardLedgerOptions{options.plan.shards}),
      spec_(data.spec()) {}

LedgerFeed::~LedgerFeed() = default;

void LedgerFeed::set_transform(ExampleTransform t) {
  for (Lane& lane : lanes_) {
    if (!lane.pipeline) continue;
    wait_ms_done_ += lane.pipeline->stats().wait_ms;
    lane.pipeline.reset();  // joins its producers
  }
  transform_ = std::move(t);
}

Status LedgerFeed::begin_epoch(int epoch) {
  for (Lane& lane : lanes_)
    if (lane.pipeline) wait_ms_done_ += lane.pipeline->stats().wait_ms;
  lanes_.clear();
  epoch_ = epoch;
  auto plan = data::plan_epoch(data_.count, data_.class_labels(), data_.classes, options_.plan, epoch);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(*plan);
  TROUPE_RETURN_IF_ERROR(ledger_.create_epoch(epoch, plan_.shard_sizes()));
  done_at_start_ = 0;
  if (auto records = ledger_.epoch_status(epoch); records.ok()) {  // for progress only: 0 when unreadable
    for (const gcs::ShardRecord& r : *records) {
      done_at_start_ += r.state == gcs::ShardState::done ? r.examples
                                                          : std::min(r.examples, std::max(r.progress, r.resume_at));
    }
  }
  const int lanes = std::max(1, options_.shards_per_step);
  lanes_.resize(static_cast<size_t>(lanes));
  for (size_t k = 0; k < lanes_.size(); ++k) {
    Lane& lane = lanes_[k];
    const int named = k < options_.named_shards.size() ? options_.named_shards[k] : -1;
    std::unique_ptr<data::IndexSource> source = std::make_unique<data::ShardSource>(ledger_, plan_, worker_, named);
    if (options_.one_shard_per_epoch) source = std::make_unique<LimitSource>(std::move(source), 1);
    data::InputPipelineOptions po;
    po.batch_size = options_.batch_size;
    po.threads = lanes > 1 ? 1 : options_.threads;  // lanes: one producer each is plenty
    po.depth = options_.depth;
    po.partial = options_.keep_partial ? data::PartialBatch::keep : data::PartialBatch::drop;
    po.hollow_before = pass_over_;
    if (transform_) {  // augmentation, in the pipeline's threads
      po.transform = [t = transform_, epoch, features = data_.features()](data::Batch& b) -> Status {
        for (int64_t r = 0; r < b.size; ++r) t(epoch, b.indices[static_cast<size_t>(r)], b.inputs.data() + r * features);
        return {};
      };
    }
    auto pipeline = data::InputPipeline::start(data_, std::move(source), po);
    if (!pipeline.ok()) return pipeline.status();
    lane.pipeline = std::move(*pipeline);
    lane.progress = std::make_unique<data::ShardProgress>(ledger_, epoch, worker_, options_.report_every);
  }
  hollow_ = pass_over_;
  delivered_ = 0;
  pass_over_ = 0;
  return {};
}

Expected<bool> LedgerFeed::next(Batch* out) {
  if (lanes_.empty()) return internal_error("LedgerFeed::next before begin_epoch");
  size_t with_rows = 0;
  for (Lane& lane : lanes_) {
    if (!lane.pipeline) return internal_error("LedgerFeed::next after set_transform stopped the epoch's pipeline");
    lane.current.reset();
    if (lane.ended) continue;  // (keep_partial only: otherwise the step ended below)
    auto batch = lane.pipeline->next();
    if (!batch.ok()) return batch.status();
    if (!batch->has_value()) {
      lane.ended = true;
      // A step is whole or not at all; keeping partial batches (a sync job's padded last step),
      // the lanes with rows left make it.
      if (!options_.keep_partial) return false;
      continue;
    }
    ++with_rows;
    lane.current = std::move(**batch);
    for (const data::ChunkProgress& p : lane.current->progress) {
      if (std::find(lane.held.begin(), lane.held.end(), p.tag) == lane.held.end()) lane.held.push_back(p.tag);
    }
  }
  if (with_rows == 0) return false;
  ++delivered_;
  const bool classes = data_.classifies();
  if (lanes_.size() == 1) {
    const data::Batch& b = *lanes_[0].current;
    const bool hollow = b.inputs.empty();  // passed over (pass_over): no rows
    *out = Batch{hollow ? nullptr : b.inputs.data(), classes && !hollow ? b.labels.data() : nullptr, b.size,
                 data_.features()};
    out->targets = classes || hollow ? nullptr : b.targets.data();
  } else {
    joined_inputs_.clear();
    joined_labels_.clear();
    joined_targets_.clear();
    int64_t rows = 0;
    for (const Lane& lane : lanes_) {
      if (!lane.current) continue;
      const data::Batch& b = *lane.current;
      joined_inputs_.insert(joined_inputs_.end(), b.inputs.begin(), b.inputs.end());
      joined_labels_.insert(joined_labels_.end(), b.labels.begin(), b.labels.end());
      joined_targets_.insert(joined_targets_.end(), b.targets.begin(), b.targets.end());
      rows += b.size;
    }
    *out = Batch{joined_inputs_.data(), classes ? joined_labels_.data() : nullptr, rows, data_.features()};
    out->targets = classes ? nullptr : joined_targets_.data();
  }
  out->target_width = data_.target_width;
  fields_.bind(spec_, out);
  return true;
}

Status LedgerFeed::trained() {
  const bool passed = delivered_ <= hollow_;  // a hollow batch passed over: one report for the pass
  for (Lane& lane : lanes_) {
    if (!lane.current) continue;
    TROUPE_RETURN_IF_ERROR(passed ? lane.progress->on_passed(*lane.current, delivered_ == hollow_)
                                  : lane.progress->on_batch(*lane.current));
  }
  return {};
}

Status LedgerFeed::end_epoch() {
  for (Lane& lane : lanes_) {
    if (!lane.pipeline) continue;
    if (lane.ended) {
      TROUPE_RETURN_IF_ERROR(lane.progress->on_end(lane.pipeline->dropped()));
      continue;
    }
    // The loop stopped before the pipeline's end (a sync job trains whole global batches only):
    // what is left of the shards this lane holds counts as seen, as `troupe train` drops its last
    // partial batch. Their records become DONE.
    for (int64_t shard : lane.held) {
      Status st = ledger_.complete(epoch_, static_cast<int>(shard), worker_);
      if (!st.ok()) return st.with_context("completing shard " + std::to_string(shard));
    }
  }
  return {};
}

DataTag LedgerFeed::position() const {
  DataTag tag;
  if (lanes_.size() != 1 || !lanes_[0].current) return tag;
  for (const data::ChunkProgress& p : lanes_[0].current->progress) {
    if (p.done > p.first) tag.push_back(DataSpan{epoch_, static_cast<int32_t>(p.tag), p.first, p.done - p.first});
  }
  return tag;
}

Status LedgerFeed::rows_of(const DataTag& tag, GatheredRows* out) {
  TaggedRows rows;
  TROUPE_RETURN_IF_ERROR(gather_tagged_rows(data_, options_.plan, tag, &tag_plans_, &rows, transform_));
  *out = std::move(static_cast<GatheredRows&>(rows));
  return {};
}

double LedgerFeed::data_wait_ms() const {
  double ms = wait_ms_done_;
  for (const Lane& lane : lanes_)
    if (lane.pipeline) ms += lane.pipeline->stats().wait_ms;
  return ms;
}

}  // namespace troupe::job
