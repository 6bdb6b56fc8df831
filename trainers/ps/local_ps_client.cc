// The in-process PsClient: the shards' own calls, one after another.
#include "trainers/ps/ps_client.h"

namespace troupe::ps {
namespace {

class LocalPsClient final : public PsClient {
 public:
  LocalPsClient(std::vector<ParameterShard*> shards, int rank) : shards_(std::move(shards)), rank_(rank) {}

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

  Status push(int64_t clock, const float* grads, const Versions& pulled) override {
    if (pulled.size() != shards_.size()) return invalid_argument("push: one version per shard expected");
    for (size_t i = 0; i < shards_.size(); ++i) {
      auto got = shards_[i]->push(rank_, clock, grads + shards_[i]->range().begin, pulled[i]);
      if (!got.ok()) return got.status();
    }
    return {};
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
};

}  // namespace

std::unique_ptr<PsClient> local_ps_client(std::vector<ParameterShard*> shards, int rank) {
  return std::unique_ptr<PsClient>(new LocalPsClient(std::move(shards), rank));
}

}  // namespace troupe::ps
