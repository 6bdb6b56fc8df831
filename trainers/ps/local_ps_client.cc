// The in-process PsClient: the shards' own calls, one after another.
#include "trainers/ps/ps_client.h"

#include <algorithm>

namespace troupe::ps {
namespace {

class LocalPsClient final : public PsClient {
 public:
  LocalPsClient(std::vector<ParameterShard*> shards, int rank) : shards_(std::move(shards)), rank_(rank) {
    for (ParameterShard* s : shards_) positions_.push_back(s->position(rank_));
  }

  size_t parameters() const override { return shards_.back()->range().end; }
  int shards() const override { return static_cast<int>(shards_.size()); }
  PsMode mode() const override { return shards_.front()->options().mode; }

  Expected<Versions> pull(int64_t clock, float* params) override {
    Versions v;
    for (ParameterShard* s : shards_) {
      auto got = s->pull(rank_, clock, params + s->range().begin);
      if (!got.ok()) return got.status();
      v.push_back(*got);
    }
    return v;
  }

  Expected<Versions> pull_final(float* params) override {
    Versions v;
    for (ParameterShard* s : shards_) {
      auto got = s->pull_final(params + s->range().begin);
      if (!got.ok()) return got.status();
      v.push_back(*got);
    }
    return v;
  }

  Status push(int64_t clock, const float* grads, const Versions& pulled, const DataTag& tag) override {
    std::vector<int> all(shards_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    return push_to(all, clock, grads, pulled, tag);
  }

  Status push_to(const std::vector<int>& which, int64_t clock, const float* grads, const Versions& pulled,
                 const DataTag& tag) override {
    if (pulled.size() != shards_.size()) return invalid_argument("push: one version per shard expected");
    for (int i : which) {
      if (i < 0 || i >= shards()) return invalid_argument("push to shard " + std::to_string(i) + " of " +
                                                          std::to_string(shards()));
      ParameterShard* s = shards_[static_cast<size_t>(i)];
      auto got = s->push(rank_, clock, grads + s->range().begin, pulled[static_cast<size_t>(i)], tag);
      if (!got.ok()) return got.status();
    }
    return {};
  }

  std::vector<WorkerPosition> positions() const override { return positions_; }
  int64_t start_clock() const override {  // a replacement's: where its predecessor got to
    int64_t top = 0;
    for (const WorkerPosition& p : positions_) top = std::max(top, p.clock);
    return top;
  }

  Expected<PushesAfter> pushes_after(int shard, int64_t clock) override {
    if (shard < 0 || shard >= shards()) return invalid_argument("history of shard " + std::to_string(shard));
    return shards_[static_cast<size_t>(shard)]->pushes_after(rank_, clock);
  }

  Status replay_on(int shard, int64_t clock, const float* grads, const DataTag& tag) override {
    if (shard < 0 || shard >= shards()) return invalid_argument("replay to shard " + std::to_string(shard));
    ParameterShard* s = shards_[static_cast<size_t>(shard)];
    return s->replay(rank_, clock, grads + s->range().begin, tag).status();
  }

  Status finish() override {
    for (ParameterShard* s : shards_) TROUPE_RETURN_IF_ERROR(s->finish_worker(rank_));
    return {};
  }

  Expected<StalenessHistogram> staleness() override {
    StalenessHistogram merged;
    for (ParameterShard* s : shards_) merged.merge(s->staleness());
    return merged;
  }

 private:
  std::vector<ParameterShard*> shards_;
  int rank_;
  std::vector<WorkerPosition> positions_;  // when created
};

}  // namespace

std::unique_ptr<PsClient> local_ps_client(std::vector<ParameterShard*> shards, int rank) {
  return std::unique_ptr<PsClient>(new LocalPsClient(std::move(shards), rank));
}

}  // namespace troupe::ps
