#include "trainers/checkpoint/checkpoint.h"

#include <algorithm>
#include <cstdio>

namespace troupe::checkpoint {

ResumeAt resume_at(const TrainingState& state, int64_t steps_per_epoch) {
  ResumeAt at{static_cast<int>(std::max<int64_t>(state.epoch, 1)), state.epoch_step};
  if (at.skip_steps >= steps_per_epoch) {  // taken at the end of its epoch
    ++at.epoch;
    at.skip_steps = 0;
  }
  return at;
}

std::string step_dir(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%012lld", static_cast<long long>(step));
  return dir + "/" + name;
}

std::string shard_path(const std::string& step_dir, int shard, int shards) {
  return step_dir + "/shard-" + std::to_string(shard) + "-of-" + std::to_string(shards) + ".ckpt";
}

void shard_range(size_t total, int shard, int shards, size_t* begin, size_t* end) {
  *begin = total * static_cast<size_t>(shard) / static_cast<size_t>(shards);
  *end = total * static_cast<size_t>(shard + 1) / static_cast<size_t>(shards);
}

Expected<TrainingState> load_checkpoint(const Manifest& m, size_t total_floats) {
  if (m.shards.empty()) return corrupt_data("checkpoint of step " + std::to_string(m.step) + " lists no shards");
  TrainingState state;
  size_t covered = 0;
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const WrittenShard& w = m.shards[i];
    TROUPE_RETURN_IF_ERROR(verify_shard_file(w.path, w.bytes, w.checksum));
    auto shard = read_shard_file(w.path);
    if (!shard.ok()) return shard.status();
    const ShardHeader& h = shard->header;
    auto bad = [&](const std::string& what) {
      return corrupt_data("checkpoint shard " + w.path + " does not belong to the checkpoint of step " +
                          std::to_string(m.step) + ": " + what);
    };
    if (i == 0) {
      if (total_floats && h.total_floats != total_floats) {
        return invalid_argument("checkpoint shard " + w.path + " holds a model of " + std::to_string(h.total_floats) +
                                " parameters; this job's has " + std::to_string(total_floats) +
                                " (another model or trainer settings?)");
      }
      state.step = h.step;
      state.epoch = h.epoch;
      state.epoch_step = h.epoch_step;
      state.params.resize(h.total_floats);
      state.optimizer.name = shard->optimizer.name;
      state.optimizer.steps = shard->optimizer.steps;
      state.optimizer.vectors.assign(shard->optimizer.vectors.size(), std::vector<float>(h.total_floats));
    }
    if (h.step != m.step) return bad("its header says step " + std::to_string(h.step));
    if (h.shard != static_cast<int32_t>(i) || h.shards != static_cast<int32_t>(m.shards.size())) {
      return bad("it is shard " + std::to_string(h.shard) + " of " + std::to_string(h.shards) + ", listed as " +
                 std::to_string(i) + " of " + std::to_string(m.shards.size()));
    }
    if (h.total_floats != state.params.size() || h.begin != covered || h.epoch != state.epoch ||
        h.epoch_step != state.epoch_step) {
      return bad("its range or epoch does not follow the shards before it");
    }
    if (shard->optimizer.name != state.optimizer.name || shard->optimizer.steps != state.optimizer.steps ||
        shard->optimizer.vectors.size() != state.optimizer.vectors.size()) {
      return bad("its optimizer state (" + shard->optimizer.name + ", " + std::to_string(shard->optimizer.steps) +
                 " steps) differs from shard 0's");
    }
    std::copy(shard->params.begin(), shard->params.end(), state.params.begin() + h.begin);
    for (size_t v = 0; v < shard->optimizer.vectors.size(); ++v)
      std::copy(shard->optimizer.vectors[v].begin(), shard->optimizer.vectors[v].end(),
                state.optimizer.vectors[v].begin() + h.begin);
    state.extras.push_back(std::move(shard->extra));
    covered = h.end;
  }
  if (covered != state.params.size()) {
    return corrupt_data("checkpoint of step " + std::to_string(m.step) + " covers " + std::to_string(covered) + " of " +
                        std::to_string(state.params.size()) + " parameters");
  }
  return state;
}

Expected<TrainingState> load_range(const Manifest& m, size_t total_floats, size_t begin, size_t end, int hint) {
  if (begin > end || end > total_floats)
    return invalid_argument("parameters [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") are not inside a model of " + std::to_string(total_floats));
  TrainingState out;
  if (hint >= 0 && static_cast<size_t>(hint) < m.shards.size()) {
    const WrittenShard& w = m.shards[static_cast<size_t>(hint)];
    TROUPE_RETURN_IF_ERROR(verify_shard_file(w.path, w.bytes, w.checksum));
    auto shard = read_shard_file(w.path);
    if (!shard.ok()) return shard.status();
    const ShardHeader& h = shard->header;
    if (h.step != m.step)
      return corrupt_data("checkpoint shard " + w.path + " says step " + std::to_string(h.step) +
                          "; its manifest is the checkpoint of step " + std::to_string(m.step));
    if (h.total_floats == total_floats && h.begin == begin && h.end == end) {
      out.step = h.step;
      out.epoch = h.epoch;
      out.epoch_step = h.epoch_step;
      out.params = std::move(shard->params);
      out.optimizer = std::move(shard->optimizer);
      return out;
    }
  }
  auto whole = load_checkpoint(m, total_floats);
  if (!whole.ok()) return whole.status();
  out.step = whole->step;
  out.epoch = whole->epoch;
  out.epoch_step = whole->epoch_step;
  out.params.assign(whole->params.begin() + static_cast<std::ptrdiff_t>(begin),
                    whole->params.begin() + static_cast<std::ptrdiff_t>(end));
  out.optimizer.name = whole->optimizer.name;
  out.optimizer.steps = whole->optimizer.steps;
  for (const std::vector<float>& v : whole->optimizer.vectors)
    out.optimizer.vectors.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(begin),
                                       v.begin() + static_cast<std::ptrdiff_t>(end));
  return out;
}

}  // namespace troupe::checkpoint
