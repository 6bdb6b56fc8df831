// Test doubles around the parameter-server worker loops (trainers/ps/async_worker.h,
// device_worker.h): a feed that tags its batches as a ledger feed does, and a client that records
// what a loop asks of the shards and makes it recompute earlier pushes (replays).
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "data/feed/batch_feed.h"
#include "trainers/ps/ps_client.h"
#include "trainers/setup/train_options.h"

namespace troupe::ps {

// A SliceFeed whose batches carry tags, as a ledger feed's do: worker `rank`'s rows of each epoch
// are ledger shard `rank` of that epoch, batch t at offset t x rows. Keeps every batch for rows_of.
class TaggedFeed final : public BatchFeed {
 public:
  TaggedFeed(const Dataset& d, const TrainOptions& o, int rank, int workers)
      : slices_(d, o.seed, o.batch_size, rank, workers), rank_(rank), features_(d.features()) {}
  Status begin_epoch(int epoch) override {
    epoch_ = epoch;
    offset_ = 0;
    return slices_.begin_epoch(epoch);
  }
  Expected<bool> next(Batch* out) override {
    auto more = slices_.next(out);
    if (!more.ok() || !*more) return more;
    tag_ = {DataSpan{epoch_, rank_, offset_, out->size}};
    offset_ += out->size;
    kept_[key(tag_)] = {std::vector<float>(out->inputs, out->inputs + out->size * features_),
                        std::vector<int32_t>(out->labels, out->labels + out->size)};
    emitted.push_back(tag_);
    return true;
  }
  Status trained() override {
    ++trained_calls;
    return {};
  }
  DataTag position() const override { return tag_; }
  Status rows_of(const DataTag& tag, GatheredRows* out) override {
    auto it = kept_.find(key(tag));
    if (it == kept_.end()) return not_found("no batch " + describe(tag));
    out->inputs = it->second.first;
    out->labels = it->second.second;
    out->targets.clear();
    out->rows = static_cast<int64_t>(out->labels.size());
    out->width = 1;
    return {};
  }
  std::vector<DataTag> emitted;
  int64_t trained_calls = 0;

 private:
  static std::pair<int, int64_t> key(const DataTag& t) { return {t.at(0).epoch, t.at(0).offset}; }
  SliceFeed slices_;
  int rank_;
  int64_t features_;
  int epoch_ = 0;
  int64_t offset_ = 0;
  DataTag tag_;
  std::map<std::pair<int, int64_t>, std::pair<std::vector<float>, std::vector<int32_t>>> kept_;
};

// A client that records what the loop asks of the shards, in order, and at chosen pushes has the
// loop recompute an earlier push (as a restored shard would make it: ps_client.h).
class RecordingClient final : public PsClient {
 public:
  struct Call {
    char kind;  // 'p' pull, 'P' push, 'F' final pull, 'f' finish
    int64_t clock = -1;
    DataTag tag;
    std::vector<float> grads;
  };
  explicit RecordingClient(std::unique_ptr<PsClient> inner) : inner_(std::move(inner)) {}
  size_t parameters() const override { return inner_->parameters(); }
  int shards() const override { return inner_->shards(); }
  PsMode mode() const override { return inner_->mode(); }
  Expected<Versions> pull(int64_t clock, float* params) override {
    calls.push_back({'p', clock, {}, {}});
    return inner_->pull(clock, params);
  }
  Expected<Versions> pull_final(float* params) override {
    calls.push_back({'F', -1, {}, {}});
    return inner_->pull_final(params);
  }
  Status push(int64_t clock, const float* grads, const Versions& pulled, const DataTag& tag) override {
    calls.push_back({'P', clock, tag, std::vector<float>(grads, grads + parameters())});
    auto at = replay_at.find(pushes_++);
    if (at != replay_at.end() && replay_) {  // a replay of push `at->second`, on this step's parameters
      std::vector<float> out(parameters(), 7.0f);
      TROUPE_RETURN_IF_ERROR(replay_(push_tags_.at(static_cast<size_t>(at->second)), Fresh{}, out.data()));
      replays.push_back(std::move(out));
    }
    push_tags_.push_back(tag);
    return inner_->push(clock, grads, pulled, tag);
  }
  Status push_to(const std::vector<int>& shards, int64_t clock, const float* grads, const Versions& pulled,
                 const DataTag& tag) override {
    return inner_->push_to(shards, clock, grads, pulled, tag);
  }
  std::vector<WorkerPosition> positions() const override { return inner_->positions(); }
  Status finish() override {
    calls.push_back({'f', -1, {}, {}});
    return inner_->finish();
  }
  Expected<StalenessHistogram> staleness() override { return inner_->staleness(); }
  void set_replay(ReplayFn replay) override { replay_ = std::move(replay); }

  std::vector<Call> calls;
  std::map<int64_t, int64_t> replay_at;  // push index -> index of the earlier push to recompute
  std::vector<std::vector<float>> replays;

 private:
  std::unique_ptr<PsClient> inner_;
  ReplayFn replay_;
  int64_t pushes_ = 0;
  std::vector<DataTag> push_tags_;
};

}  // namespace troupe::ps
