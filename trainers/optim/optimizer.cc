#include "trainers/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/cpu/ops.h"
#include "trainers/api/trainer.h"

namespace troupe {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, size_t n) : n_(n) {
    hp_.lr = o.lr;
    hp_.momentum = o.momentum;
    hp_.weight_decay = o.weight_decay;
    if (o.momentum != 0.0f) velocity_.assign(n, 0.0f);
  }
  void apply(float* params, const float* grads) override {
    kernels::cpu::sgd_step(params, grads, velocity_.empty() ? nullptr : velocity_.data(), n_, hp_);
    ++steps_;
  }
  void set_lr(float lr) override { hp_.lr = lr; }
  std::string name() const override { return "sgd"; }
  std::string describe() const override {
    std::ostringstream os;
    os << "sgd(lr=" << hp_.lr << ", momentum=" << hp_.momentum << ", weight_decay=" << hp_.weight_decay << ")";
    return os.str();
  }

 private:
  std::vector<std::vector<float>*> state_vectors() override {
    if (velocity_.empty()) return {};
    return {&velocity_};
  }
  size_t size() const override { return n_; }
  size_t n_;
  kernels::cpu::SgdParams hp_;
  std::vector<float> velocity_;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, size_t n, bool decoupled) : n_(n), m_(n, 0.0f), v_(n, 0.0f) {
    if (decoupled && o.decay_matrices_only) {
      // Alternating ranges without and with decay cover [0, n): the step runs once per range.
      size_t at = 0;
      for (const auto& r : o.decay_ranges) {
        const size_t b = std::min(r.first, n), e = std::min(r.second, n);
        if (b > at) ranges_.push_back({at, b, false});
        if (e > b) ranges_.push_back({b, e, true});
        at = std::max(at, e);
      }
      if (at < n) ranges_.push_back({at, n, false});
    }
    hp_.lr = o.lr;
    hp_.beta1 = o.beta1;
    hp_.beta2 = o.beta2;
    hp_.eps = o.eps;
    hp_.weight_decay = o.weight_decay;
    hp_.decoupled = decoupled;
  }
  void apply(float* params, const float* grads) override {
    ++steps_;
    if (ranges_.empty()) {
      kernels::cpu::adam_step(params, grads, m_.data(), v_.data(), n_, steps_, hp_);
      return;
    }
    kernels::cpu::AdamParams hp = hp_;
    for (const Range& r : ranges_) {
      hp.weight_decay = r.decay ? hp_.weight_decay : 0.0f;
      kernels::cpu::adam_step(params + r.begin, grads + r.begin, m_.data() + r.begin, v_.data() + r.begin,
                              r.end - r.begin, steps_, hp);
    }
  }
  void set_lr(float lr) override { hp_.lr = lr; }
  std::string name() const override { return hp_.decoupled ? "adamw" : "adam"; }
  std::string describe() const override {
    std::ostringstream os;
    os << (hp_.decoupled ? "adamw" : "adam") << "(lr=" << hp_.lr << ", betas=(" << hp_.beta1 << ", " << hp_.beta2
       << "), weight_decay=" << hp_.weight_decay << (ranges_.empty() ? "" : " on matrices") << ")";
    return os.str();
  }

 private:
  struct Range {
    size_t begin, end;
    bool decay;
  };
  std::vector<Range> ranges_;  // empty: one step over everything
  std::vector<std::vector<float>*> state_vectors() override { return {&m_, &v_}; }
  size_t size() const override { return n_; }
  size_t n_;
  kernels::cpu::AdamParams hp_;
  std::vector<float> m_, v_;
};

}  // namespace

// The rule runs over everything (one pass, as without state), then each state range gets back its
// value before the rule plus its averaged change: what the rule wrote there (decay, momentum of a
// change) is undone, and the rule's own state for those floats is never read.
void Optimizer::step(float* params, const float* grads) {
  kept_.clear();
  for (const auto& [b, e] : state_ranges_) kept_.insert(kept_.end(), params + b, params + e);
  apply(params, grads);
  size_t at = 0;
  for (const auto& [b, e] : state_ranges_)
    for (size_t i = b; i < e; ++i) params[i] = kept_[at++] + grads[i];
}

std::vector<const std::vector<float>*> Optimizer::state_vectors() const {
  std::vector<const std::vector<float>*> out;
  for (std::vector<float>* v : const_cast<Optimizer*>(this)->state_vectors()) out.push_back(v);
  return out;
}

OptimizerState Optimizer::save_state(size_t begin, size_t end) const {
  OptimizerState s;
  save_state_into(begin, end, &s);
  return s;
}

void Optimizer::save_state_into(size_t begin, size_t end, OptimizerState* out) const {
  out->name = name();
  out->steps = steps_;
  end = std::min(end, size());
  begin = std::min(begin, end);
  const std::vector<const std::vector<float>*> mine = state_vectors();
  out->vectors.resize(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) out->vectors[i].assign(mine[i]->begin() + begin, mine[i]->begin() + end);
}

void Optimizer::copy_state(size_t v, size_t begin, size_t end, float* out) const {
  end = std::min(end, size());
  begin = std::min(begin, end);
  const std::vector<float>& mine = *state_vectors()[v];
  std::copy(mine.begin() + begin, mine.begin() + end, out);
}

Status Optimizer::load_state(const OptimizerState& state, size_t begin) {
  if (state.name != name()) {
    return invalid_argument("optimizer state of " + state.name + " cannot be restored into " + name());
  }
  std::vector<std::vector<float>*> mine = state_vectors();
  if (state.vectors.size() != mine.size()) {
    return invalid_argument(name() + " optimizer state has " + std::to_string(state.vectors.size()) +
                            " vectors; this optimizer keeps " + std::to_string(mine.size()) +
                            " (a different momentum setting?)");
  }
  for (const std::vector<float>& v : state.vectors) {
    if (v.size() != state.vectors[0].size() || begin + v.size() > size()) {
      return invalid_argument("optimizer state slice [" + std::to_string(begin) + ", " +
                              std::to_string(begin + v.size()) + ") does not fit " + std::to_string(size()) +
                              " parameters");
    }
  }
  if (state.steps < 0) return invalid_argument("optimizer state has a negative step count");
  for (size_t i = 0; i < mine.size(); ++i) std::copy(state.vectors[i].begin(), state.vectors[i].end(), mine[i]->begin() + begin);
  steps_ = state.steps;
  return {};
}

std::vector<std::pair<size_t, size_t>> matrix_ranges(const ParameterSpace& space) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const ParamBlock& b : space.blocks()) {
    if (b.shape.size() < 2) continue;
    const size_t begin = b.param.offset, end = b.param.offset + b.param.numel;
    if (!out.empty() && out.back().second == begin) out.back().second = end;
    else out.push_back({begin, end});
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> state_ranges(const ParameterSpace& space) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const ParamBlock& b : space.blocks()) {
    if (!b.state) continue;
    const size_t begin = b.param.offset, end = b.param.offset + b.param.numel;
    if (!out.empty() && out.back().second == begin) out.back().second = end;
    else out.push_back({begin, end});
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> ranges_within(const std::vector<std::pair<size_t, size_t>>& ranges,
                                                     size_t begin, size_t end) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& r : ranges) {
    const size_t b = std::max(r.first, begin), e = std::min(r.second, end);
    if (b < e) out.push_back({b - begin, e - begin});
  }
  return out;
}

namespace {

Expected<std::unique_ptr<Optimizer>> make_rule(const OptimizerOptions& o, size_t n) {
  if (!(o.lr > 0.0f) || !std::isfinite(o.lr)) {
    return invalid_argument("learning rate " + std::to_string(o.lr) + " must be a positive finite number");
  }
  if (!(o.weight_decay >= 0.0f) || !std::isfinite(o.weight_decay)) {
    return invalid_argument("weight decay " + std::to_string(o.weight_decay) + " must be a finite number >= 0");
  }
  if (o.name == "sgd") {
    if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) return invalid_argument("sgd momentum must be in [0, 1)");
    return std::unique_ptr<Optimizer>(new Sgd(o, n));
  }
  if (o.name == "adam" || o.name == "adamw") {
    if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1)) {
      return invalid_argument("adam betas must be in [0, 1)");
    }
    if (!(o.eps > 0.0f) || !std::isfinite(o.eps)) {  // eps = 0 makes 0 / 0 where a gradient is still 0
      return invalid_argument("adam eps " + std::to_string(o.eps) + " must be a positive finite number");
    }
    if (o.name == "adamw" && o.decay_matrices_only && !o.decay_ranges_set)
      return invalid_argument("--weight-decay-params matrices: this strategy cannot tell matrices from biases yet; "
                              "use --weight-decay-params all, or the local or sync strategy");
    return std::unique_ptr<Optimizer>(new Adam(o, n, o.name == "adamw"));
  }
  return invalid_argument("optimizer '" + o.name + "' is not one of sgd, adam, adamw");
}

}  // namespace

Expected<std::unique_ptr<Optimizer>> make_optimizer(const OptimizerOptions& o, size_t n) {
  for (const auto& [b, e] : o.state_ranges)
    if (b >= e || e > n)
      return internal_error("state range [" + std::to_string(b) + ", " + std::to_string(e) + ") is outside the " +
                            std::to_string(n) + " parameters of the optimizer");
  auto made = make_rule(o, n);
  if (made.ok()) (*made)->set_state_ranges(o.state_ranges);
  return made;
}

}  // namespace troupe
