#include "trainers/optimizer.h"

#include <cmath>
#include <sstream>

#include "kernels/cpu/ops.h"

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
  void step(float* params, const float* grads) override {
    kernels::cpu::sgd_step(params, grads, velocity_.empty() ? nullptr : velocity_.data(), n_, hp_);
    ++steps_;
  }
  void set_lr(float lr) override { hp_.lr = lr; }
  std::string describe() const override {
    std::ostringstream os;
    os << "sgd(lr=" << hp_.lr << ", momentum=" << hp_.momentum << ", weight_decay=" << hp_.weight_decay << ")";
    return os.str();
  }

 private:
  size_t n_;
  kernels::cpu::SgdParams hp_;
  std::vector<float> velocity_;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, size_t n, bool decoupled) : n_(n), m_(n, 0.0f), v_(n, 0.0f) {
    hp_.lr = o.lr;
    hp_.beta1 = o.beta1;
    hp_.beta2 = o.beta2;
    hp_.eps = o.eps;
    hp_.weight_decay = o.weight_decay;
    hp_.decoupled = decoupled;
  }
  void step(float* params, const float* grads) override {
    ++steps_;
    kernels::cpu::adam_step(params, grads, m_.data(), v_.data(), n_, steps_, hp_);
  }
  void set_lr(float lr) override { hp_.lr = lr; }
  std::string describe() const override {
    std::ostringstream os;
    os << (hp_.decoupled ? "adamw" : "adam") << "(lr=" << hp_.lr << ", betas=(" << hp_.beta1 << ", " << hp_.beta2
       << "), weight_decay=" << hp_.weight_decay << ")";
    return os.str();
  }

 private:
  size_t n_;
  kernels::cpu::AdamParams hp_;
  std::vector<float> m_, v_;
};

}  // namespace

Expected<std::unique_ptr<Optimizer>> make_optimizer(const OptimizerOptions& o, size_t n) {
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
    return std::unique_ptr<Optimizer>(new Adam(o, n, o.name == "adamw"));
  }
  return invalid_argument("optimizer '" + o.name + "' is not one of sgd, adam, adamw");
}

}  // namespace troupe
