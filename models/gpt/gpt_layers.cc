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
  out.push_back({"head", {p.lnf_g, p.lnf_b, p.head}, seq_ * c.vocab, 6 * V * D * T});
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

Status GptLayers::forward_layer(int layer, const float* in, int64_t rows, const Parameters& params, float* out) {
  const int64_t blocks = model_.config().layers;
  if (layer == 0) {
    TROUPE_RETURN_IF_ERROR(read_ids(in, rows));
    model_.embed(ids_.data(), rows, seq_, params, out);
  } else if (layer <= blocks) {
    acts_.resize(rows, seq_, model_.config());
    model_.block_forward(layer - 1, in, rows, seq_, params, acts_, out);
  } else {
    const size_t n = static_cast<size_t>(rows * seq_);
    lnf_.resize(n * static_cast<size_t>(model_.config().dim));
    mean_.resize(n);
    rstd_.resize(n);
    model_.head_forward(in, rows * seq_, params, lnf_.data(), mean_.data(), rstd_.data(), out);
  }
  return {};
}

Status GptLayers::backward_layer(int layer, const float* in, const float* out, float* dout, int64_t rows,
                                 const Parameters& params, Gradients& grads, float* din) {
  (void)out;
  const int64_t blocks = model_.config().layers, D = model_.config().dim;
  const size_t xs = static_cast<size_t>(rows * seq_ * D);
  if (layer == 0) {
    TROUPE_RETURN_IF_ERROR(read_ids(in, rows));
    model_.embed_backward(ids_.data(), dout, rows, seq_, grads);
    return {};
  }
  if (layer <= blocks) {  // the block's forward again, then its backward: dout -> din in place
    acts_.resize(rows, seq_, model_.config());
    scratch_.resize(xs);
    model_.block_forward(layer - 1, in, rows, seq_, params, acts_, scratch_.data());
    float* dx = din ? din : scratch_.data();
    if (dx != dout) std::memcpy(dx, dout, xs * sizeof(float));
    model_.block_backward(layer - 1, in, acts_, rows, seq_, params, grads, dx);
    return {};
  }
  const size_t n = static_cast<size_t>(rows * seq_);
  lnf_.resize(xs);
  mean_.resize(n);
  rstd_.resize(n);
  scratch_.resize(n * static_cast<size_t>(model_.config().vocab));
  model_.head_forward(in, rows * seq_, params, lnf_.data(), mean_.data(), rstd_.data(), scratch_.data());
  std::vector<float> none;
  if (!din) {
    none.assign(xs, 0.0f);
    din = none.data();
  } else {
    std::memset(din, 0, xs * sizeof(float));
  }
  model_.head_backward(in, lnf_.data(), mean_.data(), rstd_.data(), dout, rows * seq_, params, grads, din);
  return {};
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
