#include "trainers/pipeline/stage_mirror.h"

#include <cstring>
#include <utility>

namespace troupe::pipeline {
namespace {

constexpr size_t kHeader = 4;  // step, epoch, epoch_step, the optimizer's steps (int64 each)

void header_of(const checkpoint::TrainingState& s, int64_t* h) {
  h[0] = s.step;
  h[1] = s.epoch;
  h[2] = s.epoch_step;
  h[3] = s.optimizer.steps;
}

}  // namespace

checkpoint::TrainingState MirroredStage::state(int64_t step) const {
  const Round& r = newest_.step == step ? newest_ : older_;
  checkpoint::TrainingState s;
  int64_t h[kHeader];
  const char* at = r.bytes.data();
  std::memcpy(h, at, sizeof h);
  at += sizeof h;
  s.step = h[0];
  s.epoch = h[1];
  s.epoch_step = h[2];
  s.optimizer.steps = h[3];
  s.optimizer.name = optimizer_;
  s.params.resize(params_);
  std::memcpy(s.params.data(), at, params_ * sizeof(float));
  at += params_ * sizeof(float);
  s.optimizer.vectors.assign(vectors_, std::vector<float>(params_));
  for (auto& v : s.optimizer.vectors) {
    std::memcpy(v.data(), at, params_ * sizeof(float));
    at += params_ * sizeof(float);
  }
  return s;
}

void MirroredStage::took(int stage, size_t params, size_t vectors, const std::string& optimizer) {
  stage_ = stage;
  params_ = params;
  vectors_ = vectors;
  optimizer_ = optimizer;
  std::swap(older_, newest_);  // the newest round becomes the older; the oldest's memory takes the next
  std::swap(newest_.bytes, incoming_);
  std::memcpy(&newest_.step, newest_.bytes.data(), sizeof(int64_t));
}

void MirroredStage::keep(int stage, const checkpoint::TrainingState& s) {
  const size_t n = s.params.size();
  incoming_.resize(kHeader * sizeof(int64_t) + (1 + s.optimizer.vectors.size()) * n * sizeof(float));
  char* at = incoming_.data();
  header_of(s, reinterpret_cast<int64_t*>(at));
  at += kHeader * sizeof(int64_t);
  std::memcpy(at, s.params.data(), n * sizeof(float));
  at += n * sizeof(float);
  for (const auto& v : s.optimizer.vectors) {
    std::memcpy(at, v.data(), n * sizeof(float));
    at += n * sizeof(float);
  }
  took(stage, n, s.optimizer.vectors.size(), s.optimizer.name);
}

Status exchange_stage_state(collectives::Transport& pipe, int distance, const checkpoint::TrainingState& mine,
                            size_t their_params, MirroredStage* kept, uint64_t sequence,
                            std::chrono::milliseconds timeout) {
  const int stages = pipe.size(), rank = pipe.rank();
  const int to = (rank + distance) % stages, from = ((rank - distance) % stages + stages) % stages;
  const size_t vectors = mine.optimizer.vectors.size();
  std::vector<char>& in = kept->incoming_;
  in.resize(kHeader * sizeof(int64_t) + (1 + vectors) * their_params * sizeof(float));
  collectives::CallDescriptor d;
  d.sequence = sequence;
  d.kind = collectives::CollectiveKind::shift;  // point to point: stage r to r + distance
  d.root = distance;  // (count left 0: the stages' states differ in size)
  pipe.begin_call(d);
  const auto deadline = collectives::Clock::now() + timeout;
  // In pieces straight from the state (header, parameters, each vector), each received at its place.
  int64_t header[kHeader];
  header_of(mine, header);
  char* at = in.data();
  auto piece = [&](const void* data, size_t send_bytes, size_t recv_bytes) {
    Status st = pipe.send_recv(to, data, send_bytes, from, at, recv_bytes, deadline);
    at += recv_bytes;
    return st;
  };
  const size_t theirs = their_params * sizeof(float);
  Status st = piece(header, sizeof header, sizeof header);
  if (st.ok()) st = piece(mine.params.data(), mine.params.size() * sizeof(float), theirs);
  for (size_t v = 0; v < vectors && st.ok(); ++v)
    st = piece(mine.optimizer.vectors[v].data(), mine.optimizer.vectors[v].size() * sizeof(float), theirs);
  TROUPE_RETURN_IF_ERROR(st.with_context("mirroring stage " + std::to_string(rank) + "'s state of step " +
                                         std::to_string(mine.step) + " to stage " + std::to_string(to)));
  kept->took(from, their_params, vectors, mine.optimizer.name);
  return {};
}

}  // namespace troupe::pipeline
