#include "trainers/job/ledger_feed.h"

#include <algorithm>

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

LedgerFeed::LedgerFeed(const Dataset& data, gcs::Store& store, JobId job, WorkerId worker, LedgerFeedOptions options)
    : data_(data),
      store_(store),
      job_(job),
      worker_(worker),
      options_(options),
      ledger_(store, job, data::ShardLedgerOptions{options.plan.shards}) {}

LedgerFeed::~LedgerFeed() = default;

Status LedgerFeed::begin_epoch(int epoch) {
  if (pipeline_) wait_ms_done_ += pipeline_->stats().wait_ms;
  pipeline_.reset();
  progress_.reset();
  current_.reset();
  held_.clear();
  ended_ = false;
  epoch_ = epoch;
  auto plan = data::plan_epoch(data_.count, data_.labels, data_.classes, options_.plan, epoch);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(*plan);
  TROUPE_RETURN_IF_ERROR(ledger_.create_epoch(epoch, plan_.shard_sizes()));
  std::unique_ptr<data::IndexSource> source = std::make_unique<data::ShardSource>(ledger_, plan_, worker_);
  if (options_.one_shard_per_epoch) source = std::make_unique<LimitSource>(std::move(source), 1);
  data::InputPipelineOptions po;
  po.batch_size = options_.batch_size;
  po.threads = options_.threads;
  po.depth = options_.depth;
  po.partial = data::PartialBatch::drop;
  auto pipeline = data::InputPipeline::start(data_, std::move(source), po);
  if (!pipeline.ok()) return pipeline.status();
  pipeline_ = std::move(*pipeline);
  progress_ = std::make_unique<data::ShardProgress>(ledger_, epoch, worker_, options_.report_every);
  return {};
}

Expected<bool> LedgerFeed::next(Batch* out) {
  if (!pipeline_) return internal_error("LedgerFeed::next before begin_epoch");
  current_.reset();
  auto batch = pipeline_->next();
  if (!batch.ok()) return batch.status();
  if (!batch->has_value()) {
    ended_ = true;
    return false;
  }
  current_ = std::move(**batch);
  for (const data::ChunkProgress& p : current_->progress) {
    if (std::find(held_.begin(), held_.end(), p.tag) == held_.end()) held_.push_back(p.tag);
  }
  *out = Batch{current_->inputs.data(), current_->labels.data(), current_->size, data_.features()};
  return true;
}

Status LedgerFeed::trained() {
  if (!current_) return {};
  return progress_->on_batch(*current_);
}

Status LedgerFeed::end_epoch() {
  if (!pipeline_) return {};
  if (ended_) return progress_->on_end(pipeline_->dropped());
  // The loop stopped before the pipeline's end (a sync job trains whole global batches only): what
  // is left of the shards this worker holds counts as seen, as `troupe train` drops its last partial
  // batch. Their records become DONE.
  for (int64_t shard : held_) {
    Status st = ledger_.complete(epoch_, static_cast<int>(shard), worker_);
    if (!st.ok()) return st.with_context("completing shard " + std::to_string(shard));
  }
  return {};
}

double LedgerFeed::data_wait_ms() const { return wait_ms_done_ + (pipeline_ ? pipeline_->stats().wait_ms : 0); }

}  // namespace troupe::job
