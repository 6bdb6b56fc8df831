#include "models/gpt/gpt_layers.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/transformer.h"

namespace troupe::models {

std::vector<LayerInfo> GptLayers::layer_infos() const {
  const GptModel::Params p = model_.params();
  const GptConfig& c = model_.config();
  const double T = static_cast<double>(seq_), D = static_cast<double>(c.dim), V = static_cast<double>(c.vocab);
  std::vector<LayerInfo> out;
  out.push_back({"embed", {p.wte, p.wpe}, seq_ * c.dim, 2 * T * D});
  for (size_t l = 0; l < p.blocks.size(); ++l) {
    const GptModel::BlockParams& b = p.blocks[l];
    out.push_back({"h" + std::to_string(l),
                   {b.ln1_g, b.ln1_b, b.attn_w, b.attn_b, b.proj_w, b.proj_b, b.ln2_g, b.ln2_b, b.fc_w, b.fc_b, b.fc2_w,
                    b.fc2_b},
                   seq_ * c.dim, 6 * 12 * D * D * T + 12 * D * T * T});
  }
  if (c.tie) {  // the head is the token embedding, layer 0's
    out.push_back({"head", {p.lnf_g, p.lnf_b}, seq_ * c.vocab, 6 * V * D * T, {p.wte}});
  } else {
    out.push_back({"head", {p.lnf_g, p.lnf_b, p.head}, seq_ * c.vocab, 6 * V * D * T});
  }
  return out;
}

Status GptLayers::read_ids(const float* in, int64_t rows) {
  ids_.resize(static_cast<size_t>(rows * seq_));
  for (size_t i = 0; i < ids_.size(); ++i) {
    const float id = in[i];
    ids_[i] = id == std::floor(id) && std::fabs(id) < (1 << 24) ? static_cast<int32_t>(id) : -1;
  }
  return model_.check_ids(ids_.data(), nullptr, rows, seq_);
}

Expected<GptLayers::Kept*> GptLayers::kept(int layer, int slot) {
  constexpr int kSlots = kKeptSlots;
  if (slot < 0 || slot >= kSlots)
    return invalid_argument("activation slot " + std::to_string(slot) + " is outside [0, " +
                            std::to_string(kSlots) + ")");
  if (layer < 0 || layer > model_.config().layers + 1)
    return invalid_argument("layer " + std::to_string(layer) + " is not one of the gpt's " +
                            std::to_string(model_.config().layers + 2));
  if (kept_.size() <= static_cast<size_t>(slot)) kept_.resize(static_cast<size_t>(slot) + 1);
  auto& layers = kept_[static_cast<size_t>(slot)];
  layers.resize(static_cast<size_t>(model_.config().layers + 2));
  return &layers[static_cast<size_t>(layer)];
}

Status GptLayers::forward_into(int layer, const float* in, int64_t rows, const Parameters& params, float* out,
                               Kept& k) {
  const int64_t blocks = model_.config().layers;
  if (layer == 0) {
    TROUPE_RETURN_IF_ERROR(read_ids(in, rows));
    model_.embed(ids_.data(), rows, seq_, params, out);
  } else if (layer <= blocks) {
    k.block.resize(rows, seq_, model_.config());
    model_.block_forward(layer - 1, in, rows, seq_, params, k.block, out);
  } else {
    const size_t n = static_cast<size_t>(rows * seq_);
    k.lnf.resize(n * static_cast<size_t>(model_.config().dim));
    k.mean.resize(n);
    k.rstd.resize(n);
    model_.head_forward(in, rows * seq_, params, k.lnf.data(), k.mean.data(), k.rstd.data(), out);
  }
  return {};
}

Status GptLayers::backward_from(int layer, const float* in, float* dout, int64_t rows, const Parameters& params,
                                Gradients& grads, float* din, const Kept& k) {
  const int64_t blocks = model_.config().layers, D = model_.config().dim;
  const size_t xs = static_cast<size_t>(rows * seq_ * D);
  if (layer == 0) {
    TROUPE_RETURN_IF_ERROR(read_ids(in, rows));
    model_.embed_backward(ids_.data(), dout, rows, seq_, grads);
    return {};
  }
  if (layer <= blocks) {  // dout -> din in place
    scratch_.resize(xs);
    float* dx = din ? din : scratch_.data();
    if (dx != dout) std::memcpy(dx, dout, xs * sizeof(float));
    model_.block_backward(layer - 1, in, k.block, rows, seq_, params, grads, dx);
    return {};
  }
  if (!din) {
    scratch_.assign(xs, 0.0f);
    din = scratch_.data();
  } else {
    std::memset(din, 0, xs * sizeof(float));
  }
  model_.head_backward(in, k.lnf.data(), k.mean.data(), k.rstd.data(), dout, rows * seq_, params, grads, din);
  return {};
}

Status GptLayers::forward_layer(int layer, const float* in, int64_t rows, const Parameters& params, float* out) {
  return forward_into(layer, in, rows, params, out, scratch_kept_);
}

Status GptLayers::backward_layer(int layer, const float* in, const float* out, float* dout, int64_t rows,
                                 const Parameters& params, Gradients& grads, float* din) {
  (void)out;
  if (layer > 0) {  // the layer's forward again, for what its backward reads (the output is not needed)
    const int64_t width = layer <= model_.config().layers ? model_.config().dim : model_.config().vocab;
    recomputed_.resize(static_cast<size_t>(rows * seq_ * width));
    TROUPE_RETURN_IF_ERROR(forward_into(layer, in, rows, params, recomputed_.data(), scratch_kept_));
  }
  return backward_from(layer, in, dout, rows, params, grads, din, scratch_kept_);
}

Status GptLayers::forward_layer_kept(int layer, int slot, const float* in, int64_t rows, const Parameters& params,
                                     float* out) {
  auto k = kept(layer, slot);
  if (!k.ok()) return k.status();
  return forward_into(layer, in, rows, params, out, **k);
}

Status GptLayers::backward_layer_kept(int layer, int slot, const float* in, const float* out, float* dout,
                                      int64_t rows, const Parameters& params, Gradients& grads, float* din) {
  (void)out;
  auto k = kept(layer, slot);
  if (!k.ok()) return k.status();
  return backward_from(layer, in, dout, rows, params, grads, din, **k);
}

Expected<BatchStats> GptLayers::output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) {
  const int64_t n = rows * seq_, V = model_.config().vocab;
  for (int64_t i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= V)
      return invalid_argument("target id " + std::to_string(labels[i]) + " of window " + std::to_string(i / seq_) +
                              " is outside the model's vocabulary of " + std::to_string(V) + " (--trainer-arg vocab)");
  std::vector<float> ignored;
  if (!dout) {
    ignored.resize(static_cast<size_t>(n * V));
    dout = ignored.data();
  }
  const float loss = kernels::cpu::vocab_xent(out, labels, n, V, 1.0f, dout);
  return BatchStats{loss, -1};
}

}  // namespace troupe::models
