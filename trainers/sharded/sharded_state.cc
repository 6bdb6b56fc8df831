#include "trainers/sharded/sharded_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/optim/param_init.h"

namespace troupe {

const char* shard_stage_name(ShardStage stage) {
  switch (stage) {
    case ShardStage::none: return "none";
    case ShardStage::optimizer: return "optimizer";
    case ShardStage::gradients: return "gradients";
    case ShardStage::parameters: return "parameters";
  }
  return "?";
}

bool parse_shard_stage(const std::string& name, ShardStage* out) {
  for (ShardStage s : {ShardStage::none, ShardStage::optimizer, ShardStage::gradients, ShardStage::parameters})
    if (name == shard_stage_name(s)) {
      *out = s;
      return true;
    }
  return false;
}

std::vector<OwnedChunk> plan_owned_chunks(const std::vector<GradBucket>& buckets, int rank, int size) {
  std::vector<OwnedChunk> out;
  for (const GradBucket& b : buckets) {
    OwnedChunk c;
    c.bucket_offset = b.offset;
    c.bucket_count = b.count;
    c.chunk = (b.count + static_cast<size_t>(size) - 1) / static_cast<size_t>(size);
    c.begin = b.offset + std::min(b.count, c.chunk * static_cast<size_t>(rank));
    c.end = b.offset + std::min(b.count, c.chunk * static_cast<size_t>(rank + 1));
    out.push_back(c);
  }
  return out;
}

Expected<std::unique_ptr<ShardedState>> ShardedState::create(collectives::Communicator& comm,
                                                             const std::vector<GradBucket>& buckets, size_t total,
                                                             const OptimizerOptions& optimizer,
                                                             const Options& options) {
  if (options.stage == ShardStage::none) return invalid_argument("--shard none: nothing to shard");
  std::unique_ptr<ShardedState> s(new ShardedState(comm, options));
  s->total_ = total;
  s->chunks_ = plan_owned_chunks(buckets, comm.rank(), comm.size());
  s->state_in_chunk_.resize(s->chunks_.size());
  size_t widest = 0;
  for (const OwnedChunk& c : s->chunks_) {
    widest = std::max(widest, c.chunk);
    if (c.end == c.begin) {
      s->optimizers_.emplace_back();
      continue;
    }
    // The chunk's own optimizer: --weight-decay-params matrices' ranges cut to it, relative to it.
    // So are the state blocks' ranges (kept for clipping too).
    OptimizerOptions mine = optimizer;
    mine.decay_ranges = ranges_within(optimizer.decay_ranges, c.begin, c.end);
    mine.state_ranges = ranges_within(optimizer.state_ranges, c.begin, c.end);
    s->state_in_chunk_[s->optimizers_.size()] = mine.state_ranges;
    auto opt = make_optimizer(mine, c.end - c.begin);
    if (!opt.ok()) return opt.status();
    s->vectors_ = (*opt)->save_state(0, 0).vectors.size();
    s->optimizer_bytes_ += static_cast<int64_t>(s->vectors_ * (c.end - c.begin) * sizeof(float));
    s->optimizers_.push_back(std::move(*opt));
  }
  if (s->optimizers_.empty() || std::all_of(s->optimizers_.begin(), s->optimizers_.end(),
                                              [](const auto& o) { return o == nullptr; })) {
    auto probe = make_optimizer(optimizer, 1);  // no chunk here: the vectors an optimizer of this kind keeps
    if (!probe.ok()) return probe.status();
    s->vectors_ = (*probe)->save_state(0, 0).vectors.size();
  }
  auto grads = PageBuffer::create(total);
  if (!grads.ok()) return grads.status();
  s->grads_ = std::move(*grads);
  if (options.stage == ShardStage::parameters) {
    auto params = PageBuffer::create(total);
    if (!params.ok()) return params.status();
    s->params_ = std::move(*params);
  }
  // Staging only for the units that do not divide evenly (the others are reduced and gathered in
  // place): for a model whose largest block divides by N, a bucket's padding is the small ones'.
  size_t uneven = 0;
  for (const OwnedChunk& c : s->chunks_)
    if (c.chunk * static_cast<size_t>(comm.size()) != c.bucket_count) uneven = std::max(uneven, c.chunk);
  s->staging_.assign(uneven * static_cast<size_t>(comm.size()), 0.0f);
  s->piece_.assign(widest, 0.0f);
  return s;
}

collectives::CollectiveOptions ShardedState::collective(uint64_t tag) const {
  collectives::CollectiveOptions co;
  co.timeout = options_.timeout;
  co.tag = tag;
  return co;
}

void ShardedState::note_resident() {
  const int64_t now = static_cast<int64_t>(grads_.resident_bytes());
  int64_t seen = resident_peak_.load();
  while (now > seen && !resident_peak_.compare_exchange_weak(seen, now)) {
  }
}

void ShardedState::prepare_bucket(size_t index) {
  if (index >= chunks_.size()) return;
  grads_.prepare(chunks_[index].bucket_offset, chunks_[index].bucket_offset + chunks_[index].bucket_count);
}

void ShardedState::zero_grads() {
  if (options_.stage != ShardStage::optimizer) {
    grads_.release(0, total_);
    if (options_.stage == ShardStage::gradients)
      for (size_t i = 0; i < kPrepareAhead; ++i) prepare_bucket(i);
  } else {
    std::memset(grads_.data(), 0, total_ * sizeof(float));
  }
}

Status ShardedState::reduce_bucket(size_t index, float* data, size_t count, const collectives::CollectiveOptions& co) {
  if (index >= chunks_.size() || count != chunks_[index].bucket_count)
    return internal_error("sharded reduce of bucket " + std::to_string(index) + " (" + std::to_string(count) +
                          " floats) that the plan does not have");
  const OwnedChunk& c = chunks_[index];
  const size_t padded = c.chunk * static_cast<size_t>(comm_.size());
  const float* in = data;
  if (padded != count) {  // padded to chunk x size through the staging buffer
    std::memcpy(staging_.data(), data, count * sizeof(float));
    std::fill(staging_.begin() + static_cast<std::ptrdiff_t>(count),
              staging_.begin() + static_cast<std::ptrdiff_t>(padded), 0.0f);
    in = staging_.data();
  }
  collectives::CollectiveOptions mine = co;
  mine.wire = options_.wire;
  TROUPE_RETURN_IF_ERROR(
      comm_.reduce_scatter(in, piece_.data(), c.chunk, DType::f32, collectives::ReduceOp::avg, mine));
  std::memcpy(grads_.data() + c.begin, piece_.data(), (c.end - c.begin) * sizeof(float));
  if (options_.stage != ShardStage::optimizer) {
    if (options_.measure) note_resident();  // the bucket's pages, just before they go
    release_others(grads_, c);
    // The bucket backward writes soon: one call, not a fault a page (stage parameters: its own
    // step prepares each layer's).
    if (options_.stage == ShardStage::gradients) prepare_bucket(index + kPrepareAhead);
  }
  return {};
}

Expected<bool> ShardedState::chunks_finite(const float* buffer, const std::string& what) {
  float bad = 0;
  for (const OwnedChunk& c : chunks_)
    if (!kernels::cpu::all_finite(buffer + c.begin, c.end - c.begin)) bad = 1;
  TROUPE_RETURN_IF_ERROR(comm_.allreduce(&bad, &bad, 1, DType::f32, collectives::ReduceOp::max, collective(0))
                             .with_context("agreeing whether the " + what + " are finite"));
  return bad == 0;
}

Expected<bool> ShardedState::all_finite() {
  if (options_.measure) note_resident();
  return chunks_finite(grads_.data(), "gradients");
}

Expected<bool> ShardedState::params_finite() { return chunks_finite(params_.data(), "parameters"); }

void ShardedState::scale(float factor) {
  for (const OwnedChunk& c : chunks_) kernels::cpu::scale(grads_.data() + c.begin, c.end - c.begin, factor);
}

Expected<double> ShardedState::clip_grad_norm(float max_norm) {
  double sum = 0;
  for (size_t i = 0; i < chunks_.size(); ++i)
    sum += squared_norm(grads_.data() + chunks_[i].begin, chunks_[i].end - chunks_[i].begin, state_of(i));
  // Every rank's double sum, gathered as bytes (two f32 words each: all-gather does no arithmetic)
  // and added in rank order: the same total on every rank, to a double's precision.
  std::vector<double> sums(static_cast<size_t>(comm_.size()));
  TROUPE_RETURN_IF_ERROR(comm_.allgather(&sum, sums.data(), 2, DType::f32, collective(0))
                             .with_context("summing the gradient norm over the shards"));
  double total = 0;
  for (double part : sums) total += part;
  const double norm = std::sqrt(total);
  const float factor = clip_factor(norm, max_norm);
  if (factor != 1.0f)
    for (size_t i = 0; i < chunks_.size(); ++i)
      scale_except(grads_.data() + chunks_[i].begin, chunks_[i].end - chunks_[i].begin, factor, state_of(i));
  return norm;
}

void ShardedState::step(float* params, float lr) {
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (!optimizers_[i]) continue;
    const OwnedChunk& c = chunks_[i];
    optimizers_[i]->set_lr(lr);
    optimizers_[i]->step(params + c.begin, grads_.data() + c.begin);
  }
}

Status ShardedState::gather(float* params) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const OwnedChunk& c = chunks_[i];
    TROUPE_RETURN_IF_ERROR(gather_into(i, params + c.begin, params + c.bucket_offset)
                               .with_context("all-gathering the updated parameters of bucket " +
                                             std::to_string(i + 1) + " of " + std::to_string(chunks_.size())));
  }
  gather_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {};
}

Expected<OptimizerState> ShardedState::optimizer_state(size_t begin, size_t end) {
  OptimizerState out;
  size_t vectors = 0;
  for (const auto& opt : optimizers_)
    if (opt) {
      const OptimizerState st = opt->save_state(0, 0);
      out.name = st.name;
      out.steps = st.steps;
      vectors = st.vectors.size();
      break;
    }
  // Every rank must issue the same gathers: agree on the number of state vectors (a rank whose
  // chunks are all empty knows none).
  float known = static_cast<float>(vectors);
  TROUPE_RETURN_IF_ERROR(comm_.allreduce(&known, &known, 1, DType::f32, collectives::ReduceOp::max, collective(0))
                             .with_context("agreeing on the optimizer state's vectors"));
  vectors = static_cast<size_t>(known);
  out.vectors.assign(vectors, std::vector<float>(end - begin, 0.0f));
  std::vector<OptimizerState> mine(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i)
    if (optimizers_[i]) mine[i] = optimizers_[i]->save_state(0, chunks_[i].end - chunks_[i].begin);
  for (size_t v = 0; v < vectors; ++v)
    TROUPE_RETURN_IF_ERROR(assemble(
        begin, end, [&](size_t i) { return v < mine[i].vectors.size() ? mine[i].vectors[v].data() : nullptr; },
        out.vectors[v].data(), "the optimizer state"));
  if (out.name.empty()) out.name = "sgd";  // no rank owns anything: a model smaller than the group
  return out;
}

Status ShardedState::gather_into(size_t i, const float* mine, float* unit) {
  const OwnedChunk& c = chunks_[i];
  std::fill(piece_.begin(), piece_.end(), 0.0f);
  if (mine) std::copy(mine, mine + (c.end - c.begin), piece_.begin());
  const bool even = c.chunk * static_cast<size_t>(comm_.size()) == c.bucket_count;
  TROUPE_RETURN_IF_ERROR(
      comm_.allgather(piece_.data(), even ? unit : staging_.data(), c.chunk, DType::f32, collective(i)));
  if (!even) std::memcpy(unit, staging_.data(), c.bucket_count * sizeof(float));
  return {};
}

Status ShardedState::assemble(size_t begin, size_t end, const std::function<const float*(size_t unit)>& chunk_data,
                              float* out, const std::string& what) {
  std::vector<float> unit;  // one unit whole, for the time of a checkpoint
  for (size_t i = 0; i < chunks_.size(); ++i) {
    const OwnedChunk& c = chunks_[i];
    unit.resize(c.bucket_count);
    TROUPE_RETURN_IF_ERROR(gather_into(i, chunk_data(i), unit.data())
                               .with_context("gathering " + what + " of unit " + std::to_string(i + 1) + " of " +
                                             std::to_string(chunks_.size()) + " for a checkpoint"));
    const size_t b = std::max(begin, c.bucket_offset), e = std::min(end, c.bucket_offset + c.bucket_count);
    if (b < e) std::copy(unit.begin() + static_cast<std::ptrdiff_t>(b - c.bucket_offset),
                         unit.begin() + static_cast<std::ptrdiff_t>(e - c.bucket_offset), out + (b - begin));
  }
  return {};
}

Expected<std::vector<float>> ShardedState::param_slice(size_t begin, size_t end) {
  std::vector<float> out(end - begin, 0.0f);
  TROUPE_RETURN_IF_ERROR(assemble(begin, end, [&](size_t i) { return params_.data() + chunks_[i].begin; }, out.data(),
                                  "the parameters"));
  return out;
}

void ShardedState::init_params(const ParameterSpace& space, uint64_t seed) {
  // One pass over the seed's draws for every chunk (a pass per chunk was quadratic in the layers).
  init_parameter_ranges(space, seed, owned_ranges(), params_.data());
}

void ShardedState::load_params(const float* full) {
  for (const OwnedChunk& c : chunks_) std::memcpy(params_.data() + c.begin, full + c.begin, (c.end - c.begin) * sizeof(float));
}

std::vector<size_t> ShardedState::owned_in_flat_order() const {
  std::vector<size_t> order;
  for (size_t i = 0; i < chunks_.size(); ++i)
    if (chunks_[i].end > chunks_[i].begin) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return chunks_[a].begin < chunks_[b].begin; });
  return order;
}

std::vector<std::pair<size_t, size_t>> ShardedState::owned_ranges() const {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i : owned_in_flat_order()) out.emplace_back(chunks_[i].begin, chunks_[i].end);
  return out;
}

void ShardedState::load_owned_params(const float* owned) {
  for (size_t i : owned_in_flat_order()) {
    const OwnedChunk& c = chunks_[i];
    std::memcpy(params_.data() + c.begin, owned, (c.end - c.begin) * sizeof(float));
    owned += c.end - c.begin;
  }
}

Status ShardedState::load_owned_optimizer(const OptimizerState& owned) {
  std::vector<std::pair<size_t, size_t>> at;  // the chunks one after another, in flat order
  size_t first = 0;
  for (size_t i : owned_in_flat_order()) {
    at.emplace_back(i, first);
    first += chunks_[i].end - chunks_[i].begin;
  }
  return load_chunk_states(owned, at);
}

Status ShardedState::gather_unit(size_t i, bool training) {
  const OwnedChunk& c = chunks_[i];
  TROUPE_RETURN_IF_ERROR(gather_into(i, params_.data() + c.begin, params_.data() + c.bucket_offset)
                             .with_context("all-gathering the parameters of unit " + std::to_string(i + 1) + " of " +
                                           std::to_string(chunks_.size())));
  if (options_.measure && training) params_peak_ = std::max<int64_t>(params_peak_, static_cast<int64_t>(params_.resident_bytes()));
  return {};
}

void ShardedState::release_unit(size_t i) { release_others(params_, chunks_[i]); }

void ShardedState::release_others(PageBuffer& buffer, const OwnedChunk& c) {
  buffer.release(c.bucket_offset, c.begin);
  buffer.release(c.end, c.bucket_offset + c.bucket_count);
}

Status ShardedState::gather_all() {
  for (size_t i = 0; i < chunks_.size(); ++i) TROUPE_RETURN_IF_ERROR(gather_unit(i, false));
  return {};
}

void ShardedState::release_all() {
  for (size_t i = 0; i < chunks_.size(); ++i) release_unit(i);
}

Status ShardedState::load_optimizer(const OptimizerState& whole) {
  for (const std::vector<float>& v : whole.vectors)
    if (v.size() != total_)
      return invalid_argument("the optimizer state holds " + std::to_string(v.size()) + " floats per vector; the "
                              "model has " + std::to_string(total_) + " parameters");
  std::vector<std::pair<size_t, size_t>> at;  // each chunk at its own place in the whole state
  for (size_t i = 0; i < chunks_.size(); ++i) at.emplace_back(i, chunks_[i].begin);
  return load_chunk_states(whole, at);
}

Status ShardedState::load_chunk_states(const OptimizerState& from, const std::vector<std::pair<size_t, size_t>>& at) {
  for (const auto& [i, first] : at) {
    if (!optimizers_[i]) continue;  // an empty chunk
    const size_t n = chunks_[i].end - chunks_[i].begin;
    OptimizerState mine;
    mine.name = from.name;
    mine.steps = from.steps;
    for (const std::vector<float>& v : from.vectors) {
      if (v.size() < first + n)
        return invalid_argument("the optimizer state read holds " + std::to_string(v.size()) + " floats per vector; "
                                "this replica's chunks need " + std::to_string(first + n) + " or more");
      mine.vectors.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(first),
                                v.begin() + static_cast<std::ptrdiff_t>(first + n));
    }
    TROUPE_RETURN_IF_ERROR(optimizers_[i]->load_state(mine, 0));
  }
  return {};
}

std::string ShardedState::describe() const {
  for (const auto& opt : optimizers_)
    if (opt)
      return opt->describe() + ", its state sharded 1/" + std::to_string(comm_.size()) + " (--shard " +
             shard_stage_name(options_.stage) + ")";
  return std::string("no parameters of its own (--shard ") + shard_stage_name(options_.stage) + ")";
}

size_t ShardedState::owned_floats(int rank) const {
  size_t n = 0;
  for (const OwnedChunk& c : chunks_) {
    const size_t r = static_cast<size_t>(rank);
    n += std::min(c.bucket_count, c.chunk * (r + 1)) - std::min(c.bucket_count, c.chunk * r);
  }
  return n;
}

std::vector<std::pair<size_t, size_t>> ShardedState::owned_ranges_of(int rank, int size) const {
  std::vector<GradBucket> buckets;
  for (const OwnedChunk& c : chunks_) {
    GradBucket b;
    b.offset = c.bucket_offset;
    b.count = c.bucket_count;
    buckets.push_back(b);
  }
  std::vector<std::pair<size_t, size_t>> out;
  for (const OwnedChunk& c : plan_owned_chunks(buckets, rank, size))
    if (c.end > c.begin) out.emplace_back(c.begin, c.end);
  std::sort(out.begin(), out.end());
  return out;
}

OptimizerState ShardedState::owned_optimizer() const {
  OptimizerState out;
  for (size_t i : owned_in_flat_order()) {
    if (!optimizers_[i]) continue;
    OptimizerState chunk = optimizers_[i]->save_state(0, chunks_[i].end - chunks_[i].begin);
    if (out.vectors.empty()) {
      out.name = chunk.name;
      out.steps = chunk.steps;
      out.vectors.resize(chunk.vectors.size());
    }
    for (size_t v = 0; v < chunk.vectors.size(); ++v)
      out.vectors[v].insert(out.vectors[v].end(), chunk.vectors[v].begin(), chunk.vectors[v].end());
  }
  return out;
}

float* ShardedState::copy_owned_optimizer(float* out) const {
  const std::vector<size_t> order = owned_in_flat_order();
  for (size_t v = 0; v < vectors_; ++v)
    for (size_t i : order) {
      const size_t n = chunks_[i].end - chunks_[i].begin;
      if (optimizers_[i]) optimizers_[i]->copy_state(v, 0, n, out);
      out += n;
    }
  return out;
}

int64_t ShardedState::steps() const {
  for (const auto& opt : optimizers_)
    if (opt) return opt->steps();
  return 0;
}

ShardStats ShardedState::stats() const {
  ShardStats m;
  m.parameters = options_.stage == ShardStage::parameters ? params_peak_ : static_cast<int64_t>(total_ * sizeof(float));
  m.gradients_peak = options_.stage != ShardStage::optimizer ? resident_peak_.load()
                                                             : static_cast<int64_t>(total_ * sizeof(float));
  m.optimizer = optimizer_bytes_;
  m.staging = static_cast<int64_t>((staging_.size() + piece_.size()) * sizeof(float));
  m.gather_seconds = gather_seconds_;
  return m;
}

}  // namespace troupe
