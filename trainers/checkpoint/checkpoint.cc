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

Status read_shards(const Manifest& m, size_t total_floats, const std::function<Status(ShardData& shard)>& take) {
  if (m.shards.empty()) return corrupt_data("checkpoint of step " + std::to_string(m.step) + " lists no shards");
  ShardHeader first;
  OptimizerState first_opt;  // shard 0's name, steps and vector count
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
      first = h;
      first_opt.name = shard->optimizer.name;
      first_opt.steps = shard->optimizer.steps;
      first_opt.vectors.resize(shard->optimizer.vectors.size());
    }
    if (h.step != m.step) return bad("its header says step " + std::to_string(h.step));
    if (h.shard != static_cast<int32_t>(i) || h.shards != static_cast<int32_t>(m.shards.size())) {
      return bad("it is shard " + std::to_string(h.shard) + " of " + std::to_string(h.shards) + ", listed as " +
                 std::to_string(i) + " of " + std::to_string(m.shards.size()));
    }
    if (h.total_floats != first.total_floats || h.begin != covered || h.epoch != first.epoch ||
        h.epoch_step != first.epoch_step) {
      return bad("its range or epoch does not follow the shards before it");
    }
    if (shard->optimizer.name != first_opt.name || shard->optimizer.steps != first_opt.steps ||
        shard->optimizer.vectors.size() != first_opt.vectors.size()) {
      return bad("its optimizer state (" + shard->optimizer.name + ", " + std::to_string(shard->optimizer.steps) +
                 " steps) differs from shard 0's");
    }
    covered = h.end;
    TROUPE_RETURN_IF_ERROR(take(*shard));
  }
  if (covered != first.total_floats) {
    return corrupt_data("checkpoint of step " + std::to_string(m.step) + " covers " + std::to_string(covered) + " of " +
                        std::to_string(first.total_floats) + " parameters");
  }
  return {};
}

namespace {

// The state's step, epoch and optimizer (name, steps) from `shard`; its params and optimizer
// vectors `floats` zeros.
void start_state(const ShardData& shard, size_t floats, TrainingState* state) {
  state->step = shard.header.step;
  state->epoch = shard.header.epoch;
  state->epoch_step = shard.header.epoch_step;
  state->params.assign(floats, 0.0f);
  state->optimizer.name = shard.optimizer.name;
  state->optimizer.steps = shard.optimizer.steps;
  state->optimizer.vectors.assign(shard.optimizer.vectors.size(), std::vector<float>(floats));
}

}  // namespace

Expected<TrainingState> load_checkpoint(const Manifest& m, size_t total_floats) {
  TrainingState state;
  bool started = false;
  TROUPE_RETURN_IF_ERROR(read_shards(m, total_floats, [&](ShardData& shard) -> Status {
    const ShardHeader& h = shard.header;
    if (!started) start_state(shard, h.total_floats, &state);
    started = true;
    std::copy(shard.params.begin(), shard.params.end(), state.params.begin() + static_cast<std::ptrdiff_t>(h.begin));
    for (size_t v = 0; v < shard.optimizer.vectors.size(); ++v)
      std::copy(shard.optimizer.vectors[v].begin(), shard.optimizer.vectors[v].end(),
                state.optimizer.vectors[v].begin() + static_cast<std::ptrdiff_t>(h.begin));
    state.extras.push_back(std::move(shard.extra));
    return {};
  }));
  return state;
}

namespace {

// The floats of `ranges` (checked: in order, disjoint, inside the model).
Expected<size_t> range_floats(const std::vector<Range>& ranges, size_t total_floats) {
  size_t floats = 0, last_end = 0;
  for (const Range& r : ranges) {
    if (r.begin > r.end || r.end > total_floats || r.begin < last_end)
      return invalid_argument("parameters [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                              ") are not a range after the ones before inside a model of " +
                              std::to_string(total_floats));
    floats += r.end - r.begin;
    last_end = r.end;
  }
  return floats;
}

// The parts of `ranges` inside the shard [shard_begin, ...) of `from` copied to `to` (the ranges' floats one
// after another).
void copy_ranges(const std::vector<Range>& ranges, const ShardHeader& h, const std::vector<float>& from,
                 std::vector<float>& to) {
  size_t at = 0;  // where each range starts in `to`
  for (const Range& r : ranges) {
    const size_t b = std::max<size_t>(r.begin, h.begin), e = std::min<size_t>(r.end, h.end);
    if (b < e)
      std::copy(from.begin() + static_cast<std::ptrdiff_t>(b - h.begin),
                from.begin() + static_cast<std::ptrdiff_t>(e - h.begin),
                to.begin() + static_cast<std::ptrdiff_t>(at + (b - r.begin)));
    at += r.end - r.begin;
  }
}

}  // namespace

Expected<TrainingState> load_ranges(const Manifest& m, size_t total_floats, const std::vector<Range>& params,
                                    const std::vector<Range>& optimizer) {
  auto param_floats = range_floats(params, total_floats);
  if (!param_floats.ok()) return param_floats.status();
  auto optimizer_floats = range_floats(optimizer, total_floats);
  if (!optimizer_floats.ok()) return optimizer_floats.status();
  TrainingState out;
  bool started = false;
  TROUPE_RETURN_IF_ERROR(read_shards(m, total_floats, [&](ShardData& shard) -> Status {
    if (!started) {
      start_state(shard, *optimizer_floats, &out);
      out.params.assign(*param_floats, 0.0f);
    }
    started = true;
    copy_ranges(params, shard.header, shard.params, out.params);
    for (size_t v = 0; v < shard.optimizer.vectors.size(); ++v)
      copy_ranges(optimizer, shard.header, shard.optimizer.vectors[v], out.optimizer.vectors[v]);
    return {};
  }));
  return out;
}

Expected<TrainingState> read_position(const Manifest& m) {
  if (m.shards.empty()) return corrupt_data("the checkpoint of step " + std::to_string(m.step) + " lists no shards");
  auto h = read_shard_header(m.shards.front().path);
  if (!h.ok()) return h.status();
  if (h->step != m.step)
    return corrupt_data("checkpoint shard " + m.shards.front().path + " says step " + std::to_string(h->step) +
                        "; its manifest is the checkpoint of step " + std::to_string(m.step));
  TrainingState out;
  out.step = h->step;
  out.epoch = h->epoch;
  out.epoch_step = h->epoch_step;
  return out;
}

Expected<TrainingState> load_ranges(const Manifest& m, size_t total_floats, const std::vector<Range>& ranges) {
  return load_ranges(m, total_floats, ranges, ranges);
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
  return load_ranges(m, total_floats, {{begin, end}});
}

}  // namespace troupe::checkpoint
