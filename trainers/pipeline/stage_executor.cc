#include "trainers/pipeline/stage_executor.h"

#include <algorithm>

namespace troupe::pipeline {
namespace {

using collectives::Clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Stamped on every message of a step (or an evaluation pass): all stages must be at the same one.
collectives::CallDescriptor pipe_call(uint64_t sequence, uint64_t count) {
  collectives::CallDescriptor d;
  d.sequence = sequence;
  d.kind = collectives::CollectiveKind::barrier;  // point-to-point pipeline traffic, not a collective
  d.count = count;
  return d;
}

}  // namespace

StageExecutor::StageExecutor(LayerModel& model, std::vector<LayerInfo> layers, StagePlan plan, int stage, int stages,
                             collectives::Transport* pipe, int64_t micro_rows, int slots,
                             std::chrono::milliseconds timeout)
    : model_(model), layers_(std::move(layers)), plan_(plan), stage_(stage), stages_(stages), pipe_(pipe),
      micro_rows_(micro_rows), slots_(slots), timeout_(timeout) {
  int64_t widest = plan_.in_features;
  outputs_.resize(static_cast<size_t>(slots_));
  for (int s = 0; s < slots_; ++s)
    for (int l = plan_.first_layer; l < plan_.end_layer; ++l) {
      outputs_[s].emplace_back(static_cast<size_t>(micro_rows_ * layers_[l].out_features));
      widest = std::max(widest, layers_[l].out_features);
    }
  if (stage_ > 0) inputs_.assign(static_cast<size_t>(slots_), std::vector<float>(micro_rows_ * plan_.in_features));
  grad_a_.resize(static_cast<size_t>(micro_rows_ * widest));
  grad_b_.resize(grad_a_.size());
}

size_t StageExecutor::activation_bytes() const {
  size_t floats = grad_a_.size() + grad_b_.size();
  for (const auto& v : inputs_) floats += v.size();
  for (const auto& slot : outputs_)
    for (const auto& v : slot) floats += v.size();
  return floats * sizeof(float);
}

Status StageExecutor::flush() {
  if (pending_.peer < 0) return {};
  const Outgoing out = pending_;
  pending_ = {};
  return pipe_->send(out.peer, out.data, out.bytes, Clock::now() + timeout_)
      .with_context("stage " + std::to_string(stage_) + " sending to stage " + std::to_string(out.peer));
}

Status StageExecutor::receive(int peer, void* into, size_t bytes) {
  const std::string what = "stage " + std::to_string(stage_) + " receiving from stage " + std::to_string(peer);
  if (pending_.peer == peer) {  // both ways at once: the neighbour may be sending to us right now
    const Outgoing out = pending_;
    pending_ = {};
    return pipe_->send_recv(peer, out.data, out.bytes, peer, into, bytes, Clock::now() + timeout_).with_context(what);
  }
  TROUPE_RETURN_IF_ERROR(flush());
  return pipe_->recv(peer, into, bytes, Clock::now() + timeout_).with_context(what);
}

const float* StageExecutor::micro_input(int slot, int micro, const float* inputs, int64_t rows) {
  if (stage_ > 0) return inputs_[slot].data();
  return inputs + static_cast<size_t>(micro) * rows * plan_.in_features;
}

Status StageExecutor::forward_micro(const float* in, int64_t rows, const Parameters& params, std::vector<float*>& outs,
                                    int slot) {
  const auto t0 = Clock::now();
  for (int l = plan_.first_layer, i = 0; l < plan_.end_layer; ++l, ++i) {
    TROUPE_RETURN_IF_ERROR((slot < 0 ? model_.forward_layer(l, in, rows, params, outs[i])
                                     : model_.forward_layer_kept(l, slot, in, rows, params, outs[i]))
                               .with_context("forward of layer " + std::to_string(l) + " ('" + layers_[l].name + "')"));
    in = outs[i];
  }
  busy_seconds_ += seconds(t0, Clock::now());
  return {};
}

Status StageExecutor::run_step(const std::vector<PipeOp>& ops, const float* inputs, const TargetRows& targets,
                               const Parameters& params, Gradients& grads, uint64_t sequence, StepTotals* totals) {
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  const int64_t rows = micro_rows_;
  if (pipe_) pipe_->begin_call(pipe_call(sequence, ops.size()));
  std::vector<float*> outs(outputs_.empty() ? 0 : outputs_[0].size());
  for (const PipeOp& op : ops) {
    const int slot = op.micro % slots_;
    const int kept = slots_ <= LayerModel::kKeptSlots ? slot : -1;  // beyond: the layers recompute
    for (size_t i = 0; i < outs.size(); ++i) outs[i] = outputs_[slot][i].data();
    if (op.forward) {
      if (!first) {
        TROUPE_RETURN_IF_ERROR(receive(stage_ - 1, inputs_[slot].data(), rows * plan_.in_features * sizeof(float)));
      } else if (pipe_) {
        TROUPE_RETURN_IF_ERROR(flush());
      }
      TROUPE_RETURN_IF_ERROR(forward_micro(micro_input(slot, op.micro, inputs, rows), rows, params, outs, kept)
                                 .with_context("micro-batch " + std::to_string(op.micro)));
      if (!last) pending_ = {stage_ + 1, outs.back(), rows * plan_.out_features * sizeof(float)};
      continue;
    }
    float* d = grad_a_.data();
    if (!last) {
      TROUPE_RETURN_IF_ERROR(receive(stage_ + 1, d, rows * plan_.out_features * sizeof(float)));
    } else {
      if (pipe_) TROUPE_RETURN_IF_ERROR(flush());
      const auto t0 = Clock::now();
      auto s = layer_loss(model_, outs.back(), targets.from(op.micro * rows, label_width_), rows, d);
      busy_seconds_ += seconds(t0, Clock::now());
      if (!s.ok()) return s.status().with_context("loss of micro-batch " + std::to_string(op.micro));
      totals->loss_sum += s->loss;
      totals->correct = (totals->correct < 0 || s->correct < 0) ? -1 : totals->correct + s->correct;
    }
    const auto t0 = Clock::now();
    for (int l = plan_.end_layer - 1; l >= plan_.first_layer; --l) {
      const int i = l - plan_.first_layer;
      const float* in = i == 0 ? micro_input(slot, op.micro, inputs, rows) : outs[i - 1];
      float* din = (i == 0 && first) ? nullptr : (d == grad_a_.data() ? grad_b_.data() : grad_a_.data());
      TROUPE_RETURN_IF_ERROR((kept < 0 ? model_.backward_layer(l, in, outs[i], d, rows, params, grads, din)
                                       : model_.backward_layer_kept(l, kept, in, outs[i], d, rows, params, grads, din))
                                 .with_context("backward of layer " + std::to_string(l) + " ('" + layers_[l].name +
                                               "'), micro-batch " + std::to_string(op.micro)));
      if (din) d = din;
    }
    busy_seconds_ += seconds(t0, Clock::now());
    if (!first) pending_ = {stage_ - 1, d, rows * plan_.in_features * sizeof(float)};
  }
  return pipe_ ? flush() : Status{};
}

Expected<double> StageExecutor::sum_over_stages(double value, uint64_t sequence) {
  if (!pipe_ || stages_ == 1) return value;
  collectives::CallDescriptor d = pipe_call(sequence, 0);
  d.kind = collectives::CollectiveKind::allreduce;  // one double summed over the stages
  d.reduce = 1;
  pipe_->begin_call(d);
  const auto deadline = Clock::now() + timeout_;
  if (stage_ != 0) {
    TROUPE_RETURN_IF_ERROR(pipe_->send(0, &value, sizeof value, deadline)
                               .with_context("stage " + std::to_string(stage_) + " sending its gradient norm"));
    double total = 0;
    TROUPE_RETURN_IF_ERROR(pipe_->recv(0, &total, sizeof total, deadline)
                               .with_context("stage " + std::to_string(stage_) + " receiving the gradient norm"));
    return total;
  }
  double total = value;
  for (int s = 1; s < stages_; ++s) {
    double part = 0;
    TROUPE_RETURN_IF_ERROR(pipe_->recv(s, &part, sizeof part, deadline)
                               .with_context("stage 0 receiving stage " + std::to_string(s) + "'s gradient norm"));
    total += part;
  }
  for (int s = 1; s < stages_; ++s)
    TROUPE_RETURN_IF_ERROR(pipe_->send(s, &total, sizeof total, deadline)
                               .with_context("stage 0 sending the gradient norm to stage " + std::to_string(s)));
  return total;
}

Status StageExecutor::forward_only(const float* inputs, const TargetRows& targets, int64_t rows, int64_t features,
                                   int64_t chunk, const Parameters& params, uint64_t sequence, StepTotals* totals) {
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  if (pipe_) pipe_->begin_call(pipe_call(sequence, static_cast<uint64_t>(rows)));
  std::vector<std::vector<float>> bufs;
  for (int l = plan_.first_layer; l < plan_.end_layer; ++l)
    bufs.emplace_back(static_cast<size_t>(chunk * layers_[l].out_features));
  std::vector<float*> outs;
  for (auto& b : bufs) outs.push_back(b.data());
  std::vector<float> in(first ? 0 : static_cast<size_t>(chunk * plan_.in_features));
  for (int64_t at = 0; at < rows; at += chunk) {
    const int64_t n = std::min(chunk, rows - at);
    const float* x = inputs + static_cast<size_t>(at) * features;
    if (!first) {
      TROUPE_RETURN_IF_ERROR(pipe_->recv(stage_ - 1, in.data(), n * plan_.in_features * sizeof(float),
                                         Clock::now() + timeout_)
                                 .with_context("evaluation: stage " + std::to_string(stage_) + " receiving"));
      x = in.data();
    }
    TROUPE_RETURN_IF_ERROR(forward_micro(x, n, params, outs, -1).with_context("evaluation"));
    if (!last) {
      TROUPE_RETURN_IF_ERROR(pipe_->send(stage_ + 1, outs.back(), n * plan_.out_features * sizeof(float),
                                         Clock::now() + timeout_)
                                 .with_context("evaluation: stage " + std::to_string(stage_) + " sending"));
      continue;
    }
    auto s = layer_loss(model_, outs.back(), targets.from(at, label_width_), n, nullptr);
    if (!s.ok()) return s.status().with_context("evaluation");
    totals->loss_sum += static_cast<double>(s->loss) * n;
    totals->correct = (totals->correct < 0 || s->correct < 0) ? -1 : totals->correct + s->correct;
  }
  return {};
}

}  // namespace troupe::pipeline
