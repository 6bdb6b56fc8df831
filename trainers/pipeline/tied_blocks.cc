#include "trainers/pipeline/tied_blocks.h"

#include <algorithm>
#include <string>

namespace troupe::pipeline {
namespace {

int stage_of(const std::vector<StagePlan>& plans, size_t offset) {
  for (size_t s = 0; s < plans.size(); ++s)
    if (offset >= plans[s].begin && offset < plans[s].end) return static_cast<int>(s);
  return -1;
}

}  // namespace

std::vector<TiedBlock> tied_blocks(const std::vector<LayerInfo>& layers, const std::vector<StagePlan>& plans) {
  std::vector<TiedBlock> ties;
  for (size_t s = 0; s < plans.size(); ++s)
    for (int l = plans[s].first_layer; l < plans[s].end_layer; ++l)
      for (const Param& p : layers[static_cast<size_t>(l)].shared) {
        const int owner = stage_of(plans, p.offset);
        if (owner < 0 || owner == static_cast<int>(s)) continue;
        const bool seen = std::any_of(ties.begin(), ties.end(), [&](const TiedBlock& t) {
          return t.block.offset == p.offset && t.user == static_cast<int>(s);
        });
        if (!seen) ties.push_back({p, owner, static_cast<int>(s)});
      }
  std::sort(ties.begin(), ties.end(), [](const TiedBlock& a, const TiedBlock& b) {
    return a.block.offset != b.block.offset ? a.block.offset < b.block.offset : a.user < b.user;
  });
  return ties;
}

StageTies::StageTies(std::vector<TiedBlock> ties, int stage, size_t begin, collectives::Transport* pipe,
                     std::chrono::milliseconds timeout)
    : ties_(std::move(ties)), stage_(stage), begin_(begin), pipe_(pipe), timeout_(timeout) {
  for (const TiedBlock& t : ties_) {
    if (t.user == stage_) mine_.push_back(t);
    if (t.owner == stage_) owned_.push_back(t);
  }
  for (const TiedBlock& t : mine_) {
    values_.emplace_back(t.block.numel);
    grads_.emplace_back(t.block.numel);
  }
  for (size_t i = 0; i < mine_.size(); ++i) {
    params_seg_.push_back({values_[i].data(), mine_[i].block.offset, mine_[i].block.numel});
    grads_seg_.push_back({grads_[i].data(), mine_[i].block.offset, mine_[i].block.numel});
  }
}

size_t StageTies::copy_floats() const {
  size_t n = 0;
  for (const TiedBlock& t : mine_) n += t.block.numel;
  return n;
}

void StageTies::zero_grads() {
  for (auto& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
}

Status StageTies::gather_gradients(float* grads, uint64_t sequence) { return exchange(true, grads, sequence); }

Status StageTies::share_values(const float* params, uint64_t sequence) {
  return exchange(false, const_cast<float*>(params), sequence);  // (owners only read it)
}

// One call over the pipe per exchange, the ties taken in one order on every stage: a user sends
// (gradients) or receives (values) each of its copies, the owner the other way.
Status StageTies::exchange(bool gradients, float* range, uint64_t sequence) {
  if (empty() || !pipe_) return {};
  collectives::CallDescriptor d;
  d.sequence = sequence;
  d.kind = gradients ? collectives::CollectiveKind::reduce_scatter : collectives::CollectiveKind::broadcast;
  d.count = ties_.size();
  pipe_->begin_call(d);
  const auto deadline = collectives::Clock::now() + timeout_;
  std::vector<float> incoming;
  size_t copy = 0;
  for (const TiedBlock& t : ties_) {
    const size_t bytes = t.block.numel * sizeof(float);
    const std::string what = std::string(gradients ? "the gradient" : "the values") + " of tied block #" +
                             std::to_string(t.block.index) + " (stage " + std::to_string(t.owner) + "'s, used on stage " +
                             std::to_string(t.user) + ")";
    if (t.user == stage_) {
      const size_t i = copy++;
      Status st = gradients ? pipe_->send(t.owner, grads_[i].data(), bytes, deadline)
                            : pipe_->recv(t.owner, values_[i].data(), bytes, deadline);
      if (!st.ok()) return st.with_context("stage " + std::to_string(stage_) + (gradients ? " sending " : " receiving ") + what);
    } else if (t.owner == stage_) {
      float* own = range + (t.block.offset - begin_);
      if (gradients) {
        incoming.resize(t.block.numel);
        Status st = pipe_->recv(t.user, incoming.data(), bytes, deadline);
        if (!st.ok()) return st.with_context("stage " + std::to_string(stage_) + " receiving " + what);
        for (size_t k = 0; k < t.block.numel; ++k) own[k] += incoming[k];
      } else {
        Status st = pipe_->send(t.user, own, bytes, deadline);
        if (!st.ok()) return st.with_context("stage " + std::to_string(stage_) + " sending " + what);
      }
    }
  }
  return {};
}

}  // namespace troupe::pipeline
