#include "trainers/pipeline/stage_mirror.h"

#include <cstring>
#include <vector>

namespace troupe::pipeline {
namespace {

constexpr size_t kHeader = 4;  // step, epoch, epoch_step, the optimizer's steps (int64 each)

// The state as one buffer: the header's int64s, then the parameters, then each optimizer vector.
std::vector<char> pack(const checkpoint::TrainingState& s) {
  const int64_t header[kHeader] = {s.step, s.epoch, s.epoch_step, s.optimizer.steps};
  size_t floats = s.params.size();
  for (const auto& v : s.optimizer.vectors) floats += v.size();
  std::vector<char> out(sizeof header + floats * sizeof(float));
  char* at = out.data();
  std::memcpy(at, header, sizeof header);
  at += sizeof header;
  std::memcpy(at, s.params.data(), s.params.size() * sizeof(float));
  at += s.params.size() * sizeof(float);
  for (const auto& v : s.optimizer.vectors) {
    std::memcpy(at, v.data(), v.size() * sizeof(float));
    at += v.size() * sizeof(float);
  }
  return out;
}

checkpoint::TrainingState unpack(const std::vector<char>& in, size_t params, size_t vectors, const std::string& name) {
  checkpoint::TrainingState s;
  int64_t header[kHeader];
  const char* at = in.data();
  std::memcpy(header, at, sizeof header);
  at += sizeof header;
  s.step = header[0];
  s.epoch = header[1];
  s.epoch_step = header[2];
  s.optimizer.steps = header[3];
  s.optimizer.name = name;
  s.params.resize(params);
  std::memcpy(s.params.data(), at, params * sizeof(float));
  at += params * sizeof(float);
  s.optimizer.vectors.assign(vectors, std::vector<float>(params));
  for (auto& v : s.optimizer.vectors) {
    std::memcpy(v.data(), at, params * sizeof(float));
    at += params * sizeof(float);
  }
  return s;
}

}  // namespace

Status exchange_stage_state(collectives::Transport& pipe, int distance, const checkpoint::TrainingState& mine,
                            size_t their_params, MirroredStage* kept, uint64_t sequence,
                            std::chrono::milliseconds timeout) {
  const int stages = pipe.size(), rank = pipe.rank();
  const int to = (rank + distance) % stages, from = ((rank - distance) % stages + stages) % stages;
  const std::vector<char> out = pack(mine);
  const size_t vectors = mine.optimizer.vectors.size();
  std::vector<char> in(kHeader * sizeof(int64_t) + (1 + vectors) * their_params * sizeof(float));
  collectives::CallDescriptor d;
  d.sequence = sequence;
  d.kind = collectives::CollectiveKind::shift;  // point to point: stage r to r + distance
  d.root = distance;  // (count left 0: the stages' states differ in size)
  pipe.begin_call(d);
  TROUPE_RETURN_IF_ERROR(pipe.send_recv(to, out.data(), out.size(), from, in.data(), in.size(),
                                        collectives::Clock::now() + timeout)
                             .with_context("mirroring stage " + std::to_string(rank) + "'s state of step " +
                                           std::to_string(mine.step) + " to stage " + std::to_string(to)));
  kept->stage = from;
  kept->older = std::move(kept->newest);
  kept->newest = unpack(in, their_params, vectors, mine.optimizer.name);
  return {};
}

}  // namespace troupe::pipeline
